import AppleFormats
import ArgumentParser
import Backup
import Foundation
import KeychainStore
import PhoneBackup
import _CryptoExtras

/// An iOS backup of a populated device: written against Keyferry's own encrypted archive of the
/// same device, restored against iphone-backup-decrypt extracting every file of the same
/// backup, and the password's key derivation against swift-crypto's PBKDF2 alone, in one run.
struct PhoneBackupBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ios-backup",
        abstract: "Write and restore an iOS backup of N items and M MB of files, against Keyferry's own archive and iphone-backup-decrypt.",
        discussion: """
            Targets: writing at most 1.5x Keyferry's own encrypted archive of the same device; restoring \
            onto a new device at most 1.0x the time iphone-backup-decrypt takes to extract every file of \
            the same backup; the key derivation of a phone's 10,000,000 rounds at most 1.1x swift-crypto's \
            PBKDF2-SHA256 alone on the same password and salt. The derivation is timed apart: the backups \
            compared take one round, so both sides of each comparison do the same work besides. \
            iphone-backup-decrypt comes from scripts/ios-readers (scripts/bench installs it); without it \
            that comparison is skipped.
            """)

    @Option(help: "Keychain items (mixed classes and protections, 256-byte secrets).") var items = 10_000
    @Option(help: "Megabytes of sandbox files.") var sandboxMB = 50
    @Option(help: "Runs of each, interleaved; the medians are compared.") var runs = 3
    @Option(help: "Directory for the scratch devices (default: a temporary directory).") var dir: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard items >= 0, sandboxMB >= 0 else { throw ValidationError("--items and --sandbox-mb must be zero or more.") }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1.") }
    }

    func run() throws {
        let root = URL(fileURLWithPath: dir ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("keyferry-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let passcode = "123456"
        let password = "bench backup password"
        let source = try populatedBenchDevice(at: root.appendingPathComponent("phone"), passcode: passcode, items: items, sandboxMB: sandboxMB)
        let python = ProcessInfo.processInfo.environment["KEYFERRY_IOS_READERS"].map {
            URL(fileURLWithPath: $0).appendingPathComponent("tools/bin/python")
        }.flatMap { FileManager.default.isExecutableFile(atPath: $0.path) ? $0 : nil }

        var writes: [Double] = []
        var archives: [Double] = []
        for run in 0..<runs {
            let folder = root.appendingPathComponent("ios-\(run)")
            let archive = root.appendingPathComponent("phone-\(run).kfbackup")
            try alternating(
                run,
                {
                    writes.append(
                        try seconds {
                            try PhoneBackupWriter.create(from: source, to: folder, options: .init(password: Data(password.utf8), dataProtectionRounds: 1))
                        })
                },
                { archives.append(try seconds { try DeviceBackup.create(from: source, to: archive, mode: .encrypted(password: Data(password.utf8))) }) })
        }
        source.powerOff()

        var restores: [Double] = []
        var extracts: [Double] = []
        var restored = 0
        for run in 0..<runs {
            let target = root.appendingPathComponent("new-phone-\(run)")
            try Device.initialize(at: target, options: DeviceOptions(name: "New iPhone", passcode: passcode))
            let folder = root.appendingPathComponent("ios-\(run)")
            try alternating(
                run,
                {
                    restores.append(
                        try seconds {
                            restored = try PhoneRestore.restore(folder, password: Data(password.utf8), to: target, passcode: passcode).restoredCount
                        })
                },
                {
                    guard let python else { return }
                    let output = root.appendingPathComponent("extracted-\(run)")
                    extracts.append(try seconds { try runQuietly(python, ["-c", Self.extractAll, folder.path, password, output.path]) })
                })
        }

        // The key derivation alone: a phone's keybag (both steps) against PBKDF2-SHA256 alone.
        var keybag = try BackupKeybag(tlv: try Self.keybag(of: root.appendingPathComponent("ios-0")))
        keybag.dataProtectionIterations = 10_000_000
        var derivations: [Double] = []
        var floors: [Double] = []
        for run in 0..<runs {
            try alternating(
                run, { derivations.append(try seconds { _ = try keybag.passwordKey(Data(password.utf8)) }) },
                {
                    floors.append(
                        try seconds {
                            _ = try KDF.Insecure.PBKDF2.deriveKey(
                                from: Data(password.utf8), salt: keybag.dataProtectionSalt, using: .sha256, outputByteCount: 32,
                                unsafeUncheckedRounds: Int(keybag.dataProtectionIterations))
                        })
                })
        }

        let (write, archive, restore, derivation, floor) = (median(writes), median(archives), median(restores), median(derivations), median(floors))
        let extract = extracts.isEmpty ? nil : median(extracts)
        var figures: [String: Any] = [
            "items": items, "sandboxMB": sandboxMB, "runs": runs, "writeSeconds": write, "writeRuns": writes, "archiveSeconds": archive,
            "archiveRuns": archives, "restoreSeconds": restore, "restoreRuns": restores, "restoredItems": restored, "derivationSeconds": derivation,
            "pbkdf2Seconds": floor,
        ]
        if let extract {
            figures["extractSeconds"] = extract
            figures["extractRuns"] = extracts
        }
        if json {
            printJSON(figures)
            return
        }
        print("device: \(items) items, \(sandboxMB) MB of sandbox files; medians of \(runs) interleaved runs")
        print("(the iOS backups compared take 1 round of PBKDF2; a phone's 10,000,000 are timed apart below)")
        print(String(format: "keyferry archive (own format)   %7.2f s   (= 1.00)", archive))
        print(String(format: "iOS backup written              %7.2f s   %.2fx   (target <= 1.50x)", write, write / archive))
        if let extract {
            print(String(format: "iphone-backup-decrypt, all files %6.2f s   (= 1.00)", extract))
            print(
                String(
                    format: "iOS backup restored             %7.2f s   %.2fx   (%d items onto a new device; target <= 1.00x)", restore, restore / extract,
                    restored))
        } else {
            print(
                String(
                    format: "iOS backup restored             %7.2f s   (%d items; iphone-backup-decrypt not installed: scripts/ios-readers)", restore, restored)
            )
        }
        print(String(format: "PBKDF2-SHA256, 10,000,000 rounds %6.2f s   (= 1.00, swift-crypto alone)", floor))
        print(String(format: "the keybag's password key       %7.2f s   %.2fx   (target <= 1.10x)", derivation, derivation / floor))
    }

    /// iphone-backup-decrypt's own way to take every file out of a backup.
    static let extractAll = """
        import sys
        from iphone_backup_decrypt import EncryptedBackup
        backup = EncryptedBackup(backup_directory=sys.argv[1], passphrase=sys.argv[2])
        backup.extract_files(relative_paths_like="%", output_folder=sys.argv[3], preserve_folders=True)
        """

    private static func keybag(of folder: URL) throws -> Data {
        guard let keybag = try BinaryPropertyList.decode(try Data(contentsOf: folder.appendingPathComponent("Manifest.plist")))["BackupKeyBag"]?.data
        else { throw CommandFailure("the backup's Manifest.plist has no keybag") }
        return keybag
    }
}
