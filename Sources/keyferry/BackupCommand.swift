import ArgumentParser
import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeyferrySystem
import Node
import NodeControl

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back a device up into one archive, and inspect or verify archives.",
        discussion: """
            Encrypted archives (--encrypted, with a password) carry migratable keychain items under a \
            backup keybag the password protects: they restore onto any device. ThisDeviceOnly items \
            stay wrapped with a key of the source device's hardware UID, and whenPasscodeSetThisDeviceOnly \
            items are never exported. Unencrypted archives carry every keychain item under the \
            device's key alone, so on another device none comes back; app sandboxes are in plain, \
            and only the device that wrote one can tell it from a forgery (`verify --device`). \
            The password comes from --password-file (its first line) or KEYFERRY_BACKUP_PASSWORD.
            """,
        subcommands: [Create.self, Inspect.self, Verify.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create", abstract: "Write a backup of a running, unlocked device to FILE.")
        @OptionGroup var device: DeviceDirectory
        @Option(help: "The archive to write (must not exist yet).", completion: .file()) var out: String
        @Flag(help: "Encrypt under a password (the password's key protects the backup keybag).") var encrypted = false
        @Flag(help: "Write an unencrypted archive: keychain items restore onto this device only.") var unencrypted = false
        @OptionGroup var password: BackupPassword
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard encrypted != unencrypted else { throw ValidationError("choose --encrypted or --unencrypted.") }
            if unencrypted && password.passwordFile != nil { throw ValidationError("--password-file is for --encrypted archives.") }
        }

        func run() async throws {
            // An existing path is refused by the archive writer in the node, the one place that
            // also refuses whatever appears there meanwhile.
            let destination = URL(fileURLWithPath: out).standardizedFileURL
            let secret = encrypted ? try password.read(required: true) : nil
            let client = device.client
            // A large device takes longer than a call's usual minute; progress shows it moving.
            let patientClient = NodeClient(directory: device.url, timeout: .seconds(6 * 3600))
            // On a terminal, the node's progress while it writes.
            let line = ProgressLine()
            let progress = Task {
                guard line.isShown else { return }
                while !Task.isCancelled {
                    try await Task.sleep(for: .milliseconds(300))
                    if let step = try await client.status().backupProgress { line.show("backing up \(step.done)/\(step.total)") }
                }
            }
            defer { progress.cancel() }
            let manifest: ArchiveManifest
            do {
                manifest = try await interruptibly {
                    try await patientClient.call(.backup, NodeAPI.Backup(path: destination.path, password: secret))
                }
            } catch is Interrupted {
                // The node drops a backup whose caller went away, at its next batch; wait until
                // it has, so that no partial archive is left for whoever looks next. Watched on
                // disk: asking the node would queue behind the backup's read of the store.
                progress.cancel()
                line.clear()
                if Verbosity.current >= .normal { printError("interrupted: waiting for the node to drop the backup ...") }
                for _ in 0..<600 where ArchiveWriter.isWriting(destination) {
                    try? await Task.sleep(for: .milliseconds(100))
                }
                let finished = FileManager.default.fileExists(atPath: destination.path)
                throw Interrupted(
                    cause: CommandFailure(
                        finished
                            ? "the backup had already finished: \(out) is complete"
                            : "no archive was written"))
            }
            progress.cancel()
            line.clear()
            if output.json {
                try printJSON(encodable: manifest)
                return
            }
            say("wrote \(out): \(encrypted ? "encrypted" : "unencrypted"), \(manifest.summary)")
            for warning in manifest.warnings { warn(warning) }
        }
    }

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect", abstract: "Show an archive's header, counts and warnings (no password needed).")
        @Argument(help: "The archive.", completion: .file()) var file: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let reader = try ArchiveReader(contentsOf: URL(fileURLWithPath: file))
            let manifest = try reader.unverifiedManifest()
            let header = reader.header
            if output.json {
                try printJSON(encodable: Inspection(header: header, manifest: manifest, checksummed: header.mode == .unencrypted))
                return
            }
            print("\(file): Keyferry backup, \(header.mode.rawValue)")
            print("device   \(header.deviceName.escapingControlCharacters) (\(header.deviceID.uuidString))")
            print("created  \(header.created.formatted(.iso8601))")
            if let hashing = header.passwordHashing {
                print("password Argon2id, \(hashing.parameters.operations) passes, \(hashing.parameters.memoryBytes >> 20) MiB")
            }
            print("holds    \(manifest.summary)")
            for (name, count) in manifest.counts.sorted(by: { $0.key < $1.key }) where name.hasPrefix("items.") || name.hasPrefix("notExported.") {
                print("  \(name.padded(70)) \(count)")
            }
            for warning in manifest.warnings { warn(warning) }
            if header.mode == .encrypted {
                print("(counts as recorded; `keyferry backup verify \(file) --password-file F` authenticates every byte)")
            } else {
                print(
                    "(counts checked against damage, not forgery; `keyferry backup verify \(file) --device DIR` authenticates every byte on the device that wrote it)"
                )
            }
        }

        struct Inspection: Encodable {
            var header: ArchiveHeader
            var manifest: ArchiveManifest
            /// Whether the counts were checked against the archive's digests (unencrypted
            /// archives), which detect damage but not forgery, or are as recorded (encrypted).
            var checksummed: Bool
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify", abstract: "Read and check every byte of an archive.",
            discussion: """
                An encrypted archive is authenticated under its password. An unencrypted one is \
                checked against damage anywhere, and authenticated only with --device naming the \
                device that wrote it (its digests need that device's hardware UID; a running node \
                may hold it).
                """)
        @Argument(help: "The archive.", completion: .file()) var file: String
        @OptionGroup var password: BackupPassword
        @Option(help: "Unencrypted archives: the device that wrote it, to authenticate every byte.", completion: .directory)
        var device: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let reader = try ArchiveReader(contentsOf: URL(fileURLWithPath: file))
            try password.refuseForUnencrypted(reader.header, file)
            let encrypted = reader.header.mode == .encrypted
            let secret = encrypted ? try password.read(required: true) : nil
            let keys = try device.map { try writerKeys(reader, $0) }
            var sections = 0
            let manifest = try reader.read(password: secret.map { Data($0.utf8) }, device: keys) { _, _ in sections += 1 }
            let authenticity = reader.authenticity(device: keys)
            if output.json {
                printJSON([
                    "verified": true, "authenticated": authenticity != .checksums, "authenticity": authenticity.rawValue, "sections": sections + 1,
                    "created": reader.header.created.formatted(.iso8601),
                ])
                return
            }
            defer { print("made \(reader.header.created.formatted(.iso8601)) by \(reader.header.deviceName.escapingControlCharacters)") }
            switch authenticity {
            case .password:
                print("\(file): every byte authenticated under its password (\(sections + 1) sections); \(manifest.summary)")
            case .device:
                print(
                    "\(file): every byte authenticated by \(reader.header.deviceName.escapingControlCharacters), which wrote it (\(sections + 1) sections); \(manifest.summary)"
                )
            case .checksums:
                print("\(file): every byte intact (\(sections + 1) sections); \(manifest.summary)")
                print("(unencrypted: its checksums detect damage, not forgery; --device DIR with the device that wrote it authenticates it)")
            }
        }

        /// The backup keys of the device in `directory`, which must be the one that wrote the
        /// (unencrypted, format 2) archive: anything else could authenticate nothing.
        private func writerKeys(_ reader: ArchiveReader, _ directory: String) throws -> DeviceBackupKeys {
            guard reader.header.mode == .unencrypted else {
                throw ValidationError("\(file) is encrypted: its password authenticates it, and --device means nothing for it.")
            }
            guard reader.version >= 2 else {
                throw CommandFailure(
                    "\(file) is a format \(reader.version) archive, whose unencrypted sections carry checksums only: no device can authenticate it. Verify it without --device, or make a new backup."
                )
            }
            let keys = try Device.backupKeys(at: URL(fileURLWithPath: directory))
            guard keys.deviceID == reader.header.deviceID else {
                throw CommandFailure(
                    "\(file) was written by \(reader.header.deviceName.escapingControlCharacters) (\(reader.header.deviceID.uuidString)), not by the device in \(directory) (\(keys.deviceID.uuidString)); only the device that wrote an unencrypted archive can authenticate it."
                )
            }
            return keys
        }
    }
}

/// Where a backup password comes from: a file's first line, or the environment.
struct BackupPassword: ParsableArguments {
    @Option(help: "A file whose first line is the backup password (else KEYFERRY_BACKUP_PASSWORD).", completion: .file())
    var passwordFile: String?

    func read(required: Bool) throws -> String? {
        var password: String?
        if let passwordFile {
            let data = try readInput(passwordFile, what: "the password file", limit: 64 << 10)
            password = firstLine(of: data)
        } else {
            password = ProcessInfo.processInfo.environment["KEYFERRY_BACKUP_PASSWORD"]
        }
        if required, password?.isEmpty ?? true {
            throw ValidationError("an encrypted archive needs a password: --password-file F (its first line), or KEYFERRY_BACKUP_PASSWORD.")
        }
        return password
    }

    /// An unencrypted archive takes no password. One given for it, by file or environment, is
    /// refused: the archive the user meant, encrypted, may have been replaced by one anyone
    /// could write.
    func refuseForUnencrypted(_ header: ArchiveHeader, _ file: String) throws {
        guard header.mode == .unencrypted else { return }
        let given =
            passwordFile != nil
            ? ("--password-file", "leave the option out")
            : ProcessInfo.processInfo.environment["KEYFERRY_BACKUP_PASSWORD"].map { _ in ("KEYFERRY_BACKUP_PASSWORD", "unset it") }
        guard let (source, fix) = given else { return }
        throw CommandFailure(
            "\(file) is unencrypted, so \(source) means nothing for it; if you expected an encrypted archive, it may have been replaced. "
                + "To use it as it is, \(fix).")
    }
}

extension ArchiveManifest {
    /// `3 apps, 12 keychain items (1 never exported), 4 sandbox files`
    var summary: String {
        let items = counts.filter { $0.key.hasPrefix("items.") }.values.reduce(0, +)
        let never = counts.filter { $0.key.hasPrefix("notExported.") }.values.reduce(0, +)
        let apps = counts["apps"] ?? 0
        let files = counts["sandboxFiles"] ?? 0
        return "\(apps) app\(apps == 1 ? "" : "s"), \(items) keychain item\(items == 1 ? "" : "s")"
            + (never > 0 ? " (\(never) never exported)" : "") + ", \(files) sandbox file\(files == 1 ? "" : "s")"
    }
}
