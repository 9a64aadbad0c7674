import ArgumentParser
import Foundation
import KeychainModel
import KeyferrySystem  // ProcessLock.release, named by no type here
import Logging
import Node
import NodeControl
import Relay
import RelayHTTP
import RelayPostgres
import SyncWire

struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Run the untrusted relay that circle members sync through.",
        subcommands: [Serve.self, Start.self, Stop.self])

    /// `relay start`: a relay on this machine in the background, for trying a circle by hand or
    /// in a script; its URL is the result. Everything else (https, PostgreSQL, quotas) is `serve`.
    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "start",
            abstract: "Start a relay on this machine in the background and print its URL.",
            discussion: """
                The relay runs on loopback, open to every circle, until `keyferry relay stop --data DIR`. \
                Its URL is the one line it prints, for `circle create --relay`: \
                url=$(keyferry relay start --data ./relay). Starting a relay that already runs on DIR \
                prints the URL it has. For https, PostgreSQL, admission tokens or quotas, run `relay serve`.
                """)
        @Option(help: "Directory for the relay's database and log (created if missing).", completion: .directory)
        var data: String
        @Option(help: "Address on this machine to listen on, HOST:PORT (port 0, the default, picks a free one).")
        var listen = "127.0.0.1:0"
        @OptionGroup var output: OutputOptions

        func validate() throws {
            let address = try Checked.relayAddress(listen)
            guard !address.secure, address.isLoopback else {
                throw ValidationError(
                    "relay start listens on this machine only (127.0.0.1 or ::1); for \(listen), run `keyferry relay serve` with --admission.")
            }
        }

        func run() async throws {
            let directory = URL(fileURLWithPath: data)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                throw CommandFailure(.invalidInput, "--data \(data) is a file; give a directory for the relay's database.")
            }
            let url = try await RelayLauncher.start(data: directory, listen: try Checked.relayAddress(listen))
            if output.json { printJSON(["url": url.absoluteString, "data": directory.path]) } else { print(url.absoluteString) }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "stop", abstract: "Stop the relay running on a data directory; nothing to do if none runs.")
        @Option(help: "The relay's data directory, as given to `relay start` or `relay serve`.", completion: .directory)
        var data: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let stopped = try await RelayLauncher.stop(data: URL(fileURLWithPath: data))
            if output.json { printJSON(["stopped": stopped]) } else { say(stopped ? "stopped the relay on \(data)" : "no relay runs on \(data)") }
        }
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Serve a relay in the foreground until SIGTERM or SIGINT.",
            discussion: """
                The relay stores and forwards what circle members push: sealed, signed envelopes, signed \
                membership entries and sealed key shares, in SQLite under --data. It holds no key: it can \
                read, alter or forge nothing. It keeps a membership entry only when it extends the circle's \
                history, and keys and envelopes only when a member signed the push, so a stranger cannot \
                write to a circle. Limits keep anyone from filling its disk: each circle's envelopes stay \
                within --quota (membership entries and keys still fit in a full circle, so a member can \
                always be removed), all records within --total-quota, and at most --max-circles circles are \
                created. Its log is DATA/relay.log.

                --admission says who may create a circle: `open` lets anyone, `token FILE` only whoever gives \
                one of the tokens in FILE (one a line, each at least 16 characters; `circle create \
                --admission-token`). Hand tokens to members out of band. Only creating a circle asks for one: \
                every other push is checked against the circle's signed membership, so circles that exist keep \
                working whatever the setting. On loopback the default is open; a relay listening on any other \
                address must be told.

                It compacts as it goes: a batch whose every version a newer one superseded is dropped (an \
                author's newest batch always stays), and a deletion is let go once every member acknowledged \
                it, or once the members that did not were away longer than --retention; those resync. So a \
                circle's bytes stay near one version of each item, however often they change.

                With --database postgres://USER@HOST[:PORT]/DATABASE it keeps the records in PostgreSQL \
                instead (creating or migrating its tables on start), and several relays given the same \
                database serve the same circles together. The password comes from --database-password-file \
                or PGPASSWORD, never from the command line. --data still holds the relay's log.

                With --tls-certificate and --tls-key it serves https://, for members on other machines; they \
                verify its certificate against the system's authorities and those of the PEM file \
                KEYFERRY_RELAY_CA names (set it where their nodes start, for a private CA).
                """)

        @Option(help: "Directory for the relay's database and log (created if missing).", completion: .directory)
        var data: String
        // Kept as typed: an explicit http:// beside a certificate is a contradiction to refuse.
        @Option(help: "Address to listen on, as HOST:PORT, http://HOST:PORT or https://HOST:PORT (port 0 picks a free one).")
        var listen = "127.0.0.1:7700"
        @Option(
            help: "The most bytes one circle's records may take, such as 500M or 2G (1G by default); envelopes past it are refused (507).",
            transform: Checked.byteSize)
        var quota = RelayLimits().circleBytes
        @Option(
            help: """
                Bytes past --quota that a circle's membership entries and key records may still take (1M by default), so a full \
                circle can still change its members; key records past it are refused (507) like envelopes.
                """,
            transform: Checked.byteSize)
        var reserve = RelayLimits().reserveBytes
        @Option(
            help: "The most bytes every circle's records may take together (64G by default); pushes past it are refused (507).",
            transform: Checked.byteSize)
        var totalQuota = RelayLimits().totalBytes
        @Option(help: "The most circles the relay holds (10000 by default); creating one more is refused (507).", transform: Checked.count)
        var maxCircles = RelayLimits().circles
        @Option(
            help: """
                How long a member may go without acknowledging what it read (30d by default) before the deletions it has not \
                seen are let go anyway; it then resyncs, reading everything again.
                """,
            transform: Checked.duration)
        var retention = RelayLimits().retention
        @Option(
            parsing: .upToNextOption,
            help: ArgumentHelp(
                "Who may create circles: `open` (anyone), or `token FILE` (holders of a token in FILE); open by default on loopback only.",
                valueName: "open|token FILE"))
        var admission: [String] = []
        @Option(help: "Serve https:// with this PEM certificate chain (the relay's certificate first); needs --tls-key.", completion: .file())
        var tlsCertificate: String?
        @Option(help: "The PEM private key of --tls-certificate.", completion: .file())
        var tlsKey: String?
        @Option(
            help: ArgumentHelp(
                "Keep the records in this PostgreSQL database, postgres://USER@HOST[:PORT]/DATABASE[?sslmode=require|disable][&sslrootcert=FILE]; TLS is required, loopback included, unless sslmode=disable says otherwise by name.",
                valueName: "url"))
        var database: String?
        @Option(help: "A file holding the database's password (its first line); or set PGPASSWORD.", completion: .file())
        var databasePasswordFile: String?
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard (tlsCertificate == nil) == (tlsKey == nil) else { throw ValidationError("give --tls-certificate and --tls-key together, or neither.") }
            if databasePasswordFile != nil && database == nil { throw ValidationError("--database-password-file goes with --database.") }
            let address = try Checked.relayAddress(listen)
            if address.secure && tlsCertificate == nil {
                throw ValidationError("--listen \(listen) asks for https: give --tls-certificate and --tls-key, or listen on HOST:PORT.")
            }
            guard admission.isEmpty || admission == ["open"] || (admission.count == 2 && admission[0] == "token") else {
                throw ValidationError("--admission is `open` or `token FILE`, not `\(admission.joined(separator: " "))`.")
            }
            if admission.isEmpty && !address.isLoopback {
                throw ValidationError(
                    "--listen \(listen) reaches beyond this machine: say who may create circles, --admission token FILE (holders of a token in FILE) "
                        + "or --admission open (anyone).")
            }
            if listen.lowercased().hasPrefix("http://") && tlsCertificate != nil {
                throw ValidationError(
                    "--listen \(listen) asks for http, but --tls-certificate serves https: listen on https://\(address.host):\(address.port) or HOST:PORT.")
            }
        }
        @Flag(help: .hidden) var detach = false

        func run() async throws {
            if detach { NodeLauncher.detach() }
            let directory = URL(fileURLWithPath: data)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                throw CommandFailure(.invalidInput, "--data \(data) is a file; give a directory for the relay's database.")
            }
            let tls = try tlsCertificate.map { certificate in
                do {
                    return try RelayTLS(certificateChain: URL(fileURLWithPath: certificate), privateKey: URL(fileURLWithPath: tlsKey!))
                } catch let error as RelayError {
                    throw CommandFailure(.invalidInput, "\(error)")
                }
            }
            let admission: RelayAdmission
            do { admission = try self.admission.count == 2 ? RelayAdmission(tokenFile: URL(fileURLWithPath: self.admission[1])) : .open } catch {
                throw CommandFailure(error.missing ? .notFound : .invalidInput, "--admission: \(error.reason).")
            }
            let postgres = try database.map { try postgresDatabase($0) }
            let sqlite: SQLiteRelayStorage?
            do { sqlite = postgres == nil ? try SQLiteRelayStorage(directory: directory) : nil } catch {
                throw CommandFailure("cannot keep the relay's database in --data \(data): \(userMessage(for: error).message)")
            }
            if postgres != nil {
                do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
                    throw CommandFailure("cannot keep the relay's log in --data \(data): \(userMessage(for: error).message)")
                }
            }
            let lock = try RelayLauncher.holdServingLock(data: directory)
            defer { lock.release() }
            let logger = Logger(label: "keyferry.relay") { _ in FileLogHandler(url: directory.appendingPathComponent("relay.log")) }
            let address = try Checked.relayAddress(listen)
            let json = output.json
            let announcement = RelayAnnouncement.file(in: directory)
            defer { try? FileManager.default.removeItem(at: announcement) }
            let limits = RelayLimits(circleBytes: quota, reserveBytes: reserve, totalBytes: totalQuota, circles: maxCircles, retention: retention)
            let serve: @Sendable (any RelayStorage) async throws -> Void = { storage in
                try await RelayServer.run(
                    storage: storage, limits: limits, admission: admission, tls: tls, host: address.host, port: address.port, logger: logger
                ) { bound in
                    // Unbuffered, so whoever started the relay sees it is up at once.
                    let url = "\(tls == nil ? "http" : "https")://\(address.host):\(bound)"
                    try? JSONEncoder().encode(RelayAnnouncement(url: url, pid: ProcessInfo.processInfo.processIdentifier))
                        .write(to: announcement, options: .atomic)
                    let line =
                        json
                        ? String(
                            decoding: try! JSONSerialization.data(
                                withJSONObject: ["url": url, "data": directory.path, "pid": Int(ProcessInfo.processInfo.processIdentifier)],
                                options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
                        : "relay listening on \(url) (data \(directory.path)); stop it with Ctrl-C"
                    FileHandle.standardOutput.write(Data((line + "\n").utf8))
                }
            }
            if let sqlite { return try await serve(sqlite) }
            guard let postgres else { return }
            do {
                try await PostgresRelayStorage.withStorage(postgres, logger: logger) { try await serve($0) }
            } catch let error as RelayStorageError {
                throw CommandFailure("\(error)")
            }
        }

        /// The database's address and its password, from the file or the environment.
        private func postgresDatabase(_ url: String) throws -> PostgresRelayDatabase {
            var password = ProcessInfo.processInfo.environment[PostgresRelayDatabase.passwordVariable]
            if let file = databasePasswordFile {
                guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw CommandFailure(.notFound, "--database-password-file \(file) cannot be read.")
                }
                password = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            }
            do {
                return try PostgresRelayDatabase(url: url, password: password)
            } catch let error as RelayStorageError {
                throw CommandFailure(.invalidInput, "--database: \(error.reason).")
            }
        }
    }
}
