import ArgumentParser
import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Node
import NodeControl
import PhoneBackup

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
            The password comes from --password-file (its first line), --password-stdin or \
            KEYFERRY_BACKUP_PASSWORD.

            With --format ios, the device is written as a phone writes a Finder or iTunes backup \
            (a folder: Info.plist, Manifest.plist, an encrypted Manifest.db and a blob per file), \
            which tools made for real iPhones' backups open; `restore`, `verify` and `inspect` \
            take such a folder too, a phone's own included.
            """,
        subcommands: [Create.self, Inspect.self, Verify.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Write a backup of a device to FILE: a running, unlocked one, or a powered-off one given its passcode.")
        @OptionGroup var device: DeviceDirectory
        @Option(help: "The archive to write (must not exist yet); with --format ios, the backup folder.", completion: .file()) var out: String
        @Flag(help: "Encrypt under a password (the password's key protects the backup keybag).") var encrypted = false
        @Flag(help: "Write an unencrypted archive: keychain items restore onto this device only.") var unencrypted = false
        @Option(
            help: """
                keyferry (one archive file) or ios (a backup folder as Finder and iTunes write one, \
                which iphone-backup-decrypt, mvt, pyiosbackup and iOSbackup open).
                """)
        var format: Format = .keyferry
        @Option(
            help: """
                iOS backups: rounds of PBKDF2-SHA256 the password's key takes (default 10,000,000, as \
                on a phone: seconds of work; fewer for quick tests, which every reader still opens).
                """)
        var rounds: UInt32?
        @OptionGroup var password: BackupPassword
        /// For a powered-off device: it is powered on in this process to be backed up.
        @OptionGroup var passcode: PasscodeInput
        @OptionGroup var output: OutputOptions

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case keyferry, ios
        }

        func validate() throws {
            guard encrypted != unencrypted else { throw ValidationError("choose --encrypted or --unencrypted.") }
            if unencrypted && password.isGiven { throw ValidationError("a password is for --encrypted backups.") }
            if let rounds {
                guard format == .ios else { throw ValidationError("--rounds is for --format ios; Keyferry's archives stretch the password with Argon2id.") }
                guard unencrypted == false else { throw ValidationError("--rounds is for --encrypted backups.") }
                guard (1...20_000_000).contains(rounds) else { throw ValidationError("--rounds takes 1 to 20,000,000 (a phone uses 10,000,000).") }
            }
        }

        func run() async throws {
            // An existing path is refused by the archive writer in the node, the one place that
            // also refuses whatever appears there meanwhile.
            let destination = URL(fileURLWithPath: out).standardizedFileURL
            let secret = encrypted ? try password.read(required: true) : nil
            if format == .ios { return try await writePhoneBackup(to: destination, password: secret) }
            let manifest: ArchiveManifest
            if try await nodeIsRunning() {
                manifest = try await inNode(
                    .backup, NodeAPI.Backup(path: destination.path, password: secret), to: destination, building: ArchiveWriter.isWriting,
                    nothingWritten: "no archive was written")
            } else {
                let mode: ArchiveWriter.Mode = secret.map { .encrypted(password: Data($0.utf8)) } ?? .unencrypted
                manifest = try await atRest { device, checkCancellation in
                    try DeviceBackup.create(from: device, to: destination, mode: mode) { _, _ in try checkCancellation() }
                }
            }
            if output.json {
                try printJSON(encodable: manifest)
                return
            }
            say("wrote \(out): \(encrypted ? "encrypted" : "unencrypted"), \(manifest.summary)")
            for warning in manifest.warnings { warn(warning) }
        }

        /// The device as an iOS backup folder, written by its node like an archive; the
        /// password's key derivation (seconds at a phone's cost) shows as a stage of its own.
        private func writePhoneBackup(to destination: URL, password secret: String?) async throws {
            let summary: PhoneBackupWriter.Summary
            if try await nodeIsRunning() {
                summary = try await inNode(
                    .phoneBackup, NodeAPI.PhoneBackup(path: destination.path, password: secret, rounds: rounds), to: destination,
                    building: PhoneBackupWriter.isWriting, nothingWritten: "no backup was written")
            } else {
                let options = PhoneBackupWriter.Options(password: secret.map { Data($0.utf8) }, dataProtectionRounds: rounds ?? 10_000_000)
                let line = ProgressLine()
                summary = try await atRest { device, checkCancellation in
                    try PhoneBackupWriter.create(from: device, to: destination, options: options) { step in
                        try checkCancellation()
                        if case .derivingKey(let rounds) = step { line.show("deriving the password's key (\(rounds.formatted()) rounds of PBKDF2)") }
                    }
                }
                line.clear()
            }
            if output.json {
                try printJSON(encodable: summary)
                return
            }
            say(
                "wrote \(out): an \(summary.encrypted ? "encrypted" : "unencrypted") iOS backup (UDID \(summary.udid)): \(summary.apps.items(as: "app")), "
                    + "\(summary.keychainItems.items(as: "keychain item")), \(summary.files.items(as: "sandbox file"))")
            for (name, count) in summary.leftOut.sorted(by: { $0.key < $1.key }) {
                say("  left out: \(count) \(name.replacingOccurrences(of: ".", with: " ")) item\(count == 1 ? "" : "s") (never in an iOS backup)")
            }
            for warning in summary.warnings { warn(warning) }
        }
        /// Whether the device's node runs; a device that does not exist is an error here.
        private func nodeIsRunning() async throws -> Bool {
            do {
                _ = try await device.client.status()
                return true
            } catch let error as NodeError where error.code == .notRunning {
                try DeviceLayout(root: device.url).requireDevice()
                return false
            }
        }

        /// Backs up the powered-off device in this process, unlocked with its passcode;
        /// Ctrl-C stops it at its next step, and the writer leaves nothing behind.
        private func atRest<Answer: Sendable>(_ work: @escaping @Sendable (Device, () throws -> Void) throws -> Answer) async throws -> Answer {
            let passcode = try passcode.read()
            let client = device.client
            return try await interruptibly { try await client.atRest(passcode: passcode, work) }
        }

        /// Has the node write a backup to `destination`, its progress (and any stage before the
        /// first item) shown on a terminal. A large device takes longer than a call's usual
        /// minute. Interrupted, the node drops the backup at its next step; this waits until
        /// `building` says nothing is being built beside `destination` (watched on disk: asking
        /// the node would queue behind the backup's read of the store), so that no partial
        /// backup is left for whoever looks next.
        private func inNode<Body, Answer>(
            _ route: NodeAPI.Route<Body, Answer>, _ request: Body, to destination: URL, building: (URL) -> Bool, nothingWritten: String
        ) async throws -> Answer {
            let client = device.client
            let patientClient = NodeClient(directory: device.url, timeout: .seconds(6 * 3600))
            let line = ProgressLine()
            let progress = Task {
                guard line.isShown else { return }
                // A stage with no count (the password's key) shows how long it has taken.
                var stageStarted: (stage: String, at: ContinuousClock.Instant)?
                while !Task.isCancelled {
                    try await Task.sleep(for: .milliseconds(300))
                    guard let step = try await client.status().backupProgress else { continue }
                    guard let stage = step.stage else {
                        line.show("backing up \(step.done)/\(step.total)")
                        continue
                    }
                    let started = stageStarted.flatMap { $0.stage == stage ? $0.at : nil } ?? .now
                    stageStarted = (stage, started)
                    line.show("\(stage), \((ContinuousClock.now - started).components.seconds) s")
                }
            }
            defer { progress.cancel() }
            let answer: Answer
            do {
                answer = try await interruptibly { try await patientClient.call(route, request) }
            } catch is Interrupted {
                progress.cancel()
                line.clear()
                if Verbosity.current >= .normal { printError("interrupted: waiting for the node to drop the backup ...") }
                for _ in 0..<600 where building(destination) {
                    try? await Task.sleep(for: .milliseconds(100))
                }
                let finished = FileManager.default.fileExists(atPath: destination.path)
                throw Interrupted(cause: CommandFailure(finished ? "the backup had already finished: \(out) is complete" : nothingWritten))
            }
            progress.cancel()
            line.clear()
            return answer
        }
    }

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect", abstract: "Show an archive's header, counts and warnings (no password needed).")
        @Argument(help: "The archive, or an iOS backup folder.", completion: .file()) var file: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            if try PhoneBackupPresentation.isPhoneBackup(file, partial: true) { return try PhoneBackupPresentation.inspect(file, json: output.json) }
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
            // `items.CLASS.PROTECTION` and `notExported.CLASS.WHY` as a table in Apple's words.
            let rows = manifest.counts.sorted(by: { $0.key < $1.key }).filter { $0.key.hasPrefix("items.") || $0.key.hasPrefix("notExported.") }
                .map { name, count in (count, name.split(separator: ".").map { String($0).escapingControlCharacters }) }
            // Columns as wide as their longest entry, so classes and protections line up.
            let classWidth = rows.map { $0.1.count > 1 ? $0.1[1].count : 0 }.max() ?? 0
            for (count, parts) in rows {
                let what = ([parts.count > 1 ? parts[1].padded(classWidth) : ""] + parts.dropFirst(2)).joined(separator: "  ")
                print("  \(String(count).padded(6)) \(parts[0] == "items" ? "" : "never exported: ")\(what)")
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
        @Argument(help: "The archive, or an iOS backup folder.", completion: .file()) var file: String
        @OptionGroup var password: BackupPassword
        @Option(
            help: """
                Unencrypted archives: the device that wrote it, to authenticate every byte. iOS backups: the \
                Keyferry device that wrote it, to open its ThisDeviceOnly items too.
                """, completion: .directory)
        var device: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            if try PhoneBackupPresentation.isPhoneBackup(file) {
                return try PhoneBackupPresentation.verify(file, password: password, device: device, json: output.json)
            }
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
                    "verified": true, "authenticated": authenticity != .checksums, "authenticity": authenticity.rawValue, "sections": sections,
                    "created": reader.header.created.formatted(.iso8601),
                ])
                return
            }
            defer { print("made \(reader.header.created.formatted(.iso8601)) by \(reader.header.deviceName.escapingControlCharacters)") }
            switch authenticity {
            case .password:
                print("\(file): every byte authenticated under its password (\(sections) sections and its manifest); \(manifest.summary)")
            case .device:
                print(
                    "\(file): every byte authenticated by \(reader.header.deviceName.escapingControlCharacters), which wrote it (\(sections) sections and its manifest); \(manifest.summary)"
                )
            case .checksums, .keychainItems, .unauthenticated:
                print("\(file): every byte intact (\(sections) sections and its manifest); \(manifest.summary)")
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
                    .invalidInput,
                    "\(file) is a format \(reader.version) archive, whose unencrypted sections carry checksums only: no device can authenticate it. Verify it without --device, or make a new backup."
                )
            }
            let keys = try Device.backupKeys(at: URL(fileURLWithPath: directory))
            guard keys.deviceID == reader.header.deviceID else {
                throw CommandFailure(
                    .invalidInput,
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
    @Flag(help: "Read the backup password from the first line of standard input.") var passwordStdin = false

    func validate() throws {
        if passwordFile != nil && passwordStdin { throw ValidationError("choose --password-file or --password-stdin, not both.") }
    }

    /// Whether a password was given on the command line (by file or standard input).
    var isGiven: Bool { passwordFile != nil || passwordStdin }

    func read(required: Bool) throws -> String? {
        var password: String?
        if let passwordFile {
            let data = try readInput(passwordFile, what: "the password file", limit: 64 << 10)
            password = firstLine(of: data)
        } else if passwordStdin {
            password = firstLine(of: try readInput(nil, what: "the password on standard input", limit: 64 << 10))
        } else {
            password = ProcessInfo.processInfo.environment["KEYFERRY_BACKUP_PASSWORD"]
        }
        if required, password?.isEmpty ?? true {
            throw ValidationError(
                "an encrypted backup needs a password: --password-file F (its first line), --password-stdin, or KEYFERRY_BACKUP_PASSWORD.")
        }
        return password
    }

    /// An unencrypted archive takes no password. One given for it, by file or environment, is
    /// refused: the archive the user meant, encrypted, may have been replaced by one anyone
    /// could write.
    func refuseForUnencrypted(_ header: ArchiveHeader, _ file: String) throws {
        try refuseForUnencrypted(encrypted: header.mode == .encrypted, file)
    }

    func refuseForUnencrypted(encrypted: Bool, _ file: String) throws {
        guard !encrypted else { return }
        let given =
            isGiven
            ? (passwordFile != nil ? "--password-file" : "--password-stdin", "leave the option out")
            : ProcessInfo.processInfo.environment["KEYFERRY_BACKUP_PASSWORD"].map { _ in ("KEYFERRY_BACKUP_PASSWORD", "unset it") }
        guard let (source, fix) = given else { return }
        throw CommandFailure(
            .invalidInput,
            "\(file) is unencrypted, so \(source) means nothing for it; if you expected an encrypted archive, it may have been replaced. "
                + "To use it as it is, \(fix).")
    }
}

extension ArchiveManifest {
    /// `3 apps, 12 keychain items, 4 sandbox files; 1 more item never exported`
    var summary: String {
        let items = counts.filter { $0.key.hasPrefix("items.") }.values.reduce(0, +)
        let never = counts.filter { $0.key.hasPrefix("notExported.") }.values.reduce(0, +)
        let apps = counts["apps"] ?? 0
        let files = counts["sandboxFiles"] ?? 0
        return "\(apps) app\(apps == 1 ? "" : "s"), \(items) keychain item\(items == 1 ? "" : "s"), \(files) sandbox file\(files == 1 ? "" : "s")"
            + (never > 0 ? "; \(never) more item\(never == 1 ? "" : "s") never exported" : "")
    }
}
