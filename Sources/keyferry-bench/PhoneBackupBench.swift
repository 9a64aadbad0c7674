import AppleFormats
import ArgumentParser
import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
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

    @Option(
        help: """
            phone: a device shaped like a real phone's backup (150 apps, 3,000 files of which most are small and \
            five are 20 MB, 2,000 keychain items over five classes with a phone's attributes); flat: --items \
            items and --sandbox-mb of 1 MB files over four apps.
            """)
    var shape: Shape = .phone
    @Option(help: "With --shape flat: keychain items (mixed classes and protections, 256-byte secrets).") var items = 10_000
    @Option(help: "With --shape flat: megabytes of sandbox files.") var sandboxMB = 50
    @Option(help: "Runs of each, interleaved; the medians are compared.") var runs = 3
    @Option(help: "Directory for the scratch devices (default: a temporary directory).") var dir: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    enum Shape: String, ExpressibleByArgument, CaseIterable {
        case phone, flat
    }

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
        let source =
            shape == .phone
            ? try phoneShapedDevice(at: root.appendingPathComponent("phone"), passcode: passcode)
            : try populatedBenchDevice(at: root.appendingPathComponent("phone"), passcode: passcode, items: items, sandboxMB: sandboxMB)
        let itemCount = try source.status().itemCount
        let appCount = try source.installedApps().count
        // The shipped binary restores, as a user runs it, so that its peak memory is its own.
        let binary = try? KeyferryBinary.url()
        let secrets = root.appendingPathComponent("secrets")
        try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: true)
        try Data(passcode.utf8).write(to: secrets.appendingPathComponent("passcode"))
        try Data(password.utf8).write(to: secrets.appendingPathComponent("password"))
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
        var restorePeaks: [Int] = []
        var extractPeaks: [Int] = []
        var restored = 0
        for run in 0..<runs {
            let target = root.appendingPathComponent("new-phone-\(run)")
            try Device.initialize(at: target, options: DeviceOptions(name: "New iPhone", passcode: passcode))
            let folder = root.appendingPathComponent("ios-\(run)")
            try alternating(
                run,
                {
                    guard let binary else {
                        restores.append(
                            try seconds {
                                restored = try PhoneRestore.restore(folder, password: Data(password.utf8), to: target, passcode: passcode).restoredCount
                            })
                        return
                    }
                    let (elapsed, peak) = try measuredRun(
                        binary,
                        [
                            "restore", folder.path, "--to", target.path, "--passcode-file", secrets.appendingPathComponent("passcode").path,
                            "--password-file", secrets.appendingPathComponent("password").path, "--quiet",
                        ])
                    restores.append(elapsed)
                    if let peak { restorePeaks.append(peak) }
                },
                {
                    guard let python else { return }
                    let output = root.appendingPathComponent("extracted-\(run)")
                    let (elapsed, peak) = try measuredRun(python, ["-c", Self.extractAll, folder.path, password, output.path])
                    extracts.append(elapsed)
                    if let peak { extractPeaks.append(peak) }
                })
            if binary != nil { restored = try Self.restoredCount(target, passcode: passcode) }
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
            "shape": shape.rawValue, "items": itemCount, "apps": appCount, "runs": runs, "writeSeconds": write, "writeRuns": writes, "archiveSeconds": archive,
            "archiveRuns": archives, "restoreSeconds": restore, "restoreRuns": restores, "restoredItems": restored, "derivationSeconds": derivation,
            "pbkdf2Seconds": floor,
        ]
        if let extract {
            figures["extractSeconds"] = extract
            figures["extractRuns"] = extracts
        }
        if let peak = restorePeaks.max() { figures["restorePeakBytes"] = peak }
        if let peak = extractPeaks.max() { figures["extractPeakBytes"] = peak }
        if json {
            printJSON(figures)
            return
        }
        print(
            "device (\(shape.rawValue)): \(appCount) apps, \(itemCount) items, \(Self.fileSummary(source)); medians of \(runs) interleaved runs")
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
        if let peak = restorePeaks.max() {
            print(
                "peak memory: restore \(peak >> 20) MB"
                    + (extractPeaks.max().map { ", iphone-backup-decrypt \($0 >> 20) MB" } ?? "") + " (most resident at once, of any run)")
        }
        print(String(format: "PBKDF2-SHA256, 10,000,000 rounds %6.2f s   (= 1.00, swift-crypto alone)", floor))
        print(String(format: "the keybag's password key       %7.2f s   %.2fx   (target <= 1.10x)", derivation, derivation / floor))
    }

    /// A device shaped like a real phone's backup: 150 apps, each with a few UserDefaults and
    /// twenty files (most between 512 bytes and 16 KB, five of them 20 MB), and 2,000 keychain
    /// items over the five classes a phone backs up, with the attributes phones write: labels,
    /// descriptions, comments, generic data, accounts as data, internet passwords with their
    /// protocol, authentication type, port and path, keys with tags.
    private func phoneShapedDevice(at directory: URL, passcode: String) throws -> Device {
        let device = try Device.create(at: directory, options: DeviceOptions(name: "Bench iPhone", passcode: passcode))
        let apps = (0..<150).map { AppManifest(bundleID: String(format: "com.example.app%03d", $0), teamID: "BENCH12345") }
        for app in apps { try device.install(app) }
        let protections: [ProtectionClass] = [
            .whenUnlocked, .afterFirstUnlock, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
        ]
        let entropy = SystemEntropy()
        var generator = SystemRandomNumberGenerator()
        for (number, app) in apps.enumerated() {
            let items = (0..<2_000).filter { $0 % apps.count == number }.map { index -> NewItem in
                let protection = protections[index % protections.count]
                let secret = Data(entropy.bytes(16 + Int(generator.next() % 497)))
                switch index % 10 {
                case 0..<6:
                    let account: AttributeValue = index % 4 == 0 ? .data(Data("user\(index)".utf8)) : .string("user\(index)@example.com")
                    return NewItem(
                        .genericPassword,
                        attributes: [
                            .account: account, .service: .string("\(app.bundleID).session"), .label: .string("Session \(index)"),
                            .description: .string("token"), .comment: .string("made for the benchmark"), .generic: .data(Data(entropy.bytes(24))),
                        ], data: secret, protection: protection)
                case 6..<9:
                    return NewItem(
                        .internetPassword,
                        attributes: [
                            .account: .string("user\(index)"), .server: .string("host\(index % 97).example.com"),
                            .protocol: .string(index % 2 == 0 ? "htps" : "imps"), .authenticationType: .string("dflt"),
                            .port: .number(index % 2 == 0 ? 443 : 993), .path: .string("/"), .label: .string("host\(index % 97)"),
                        ], data: secret, protection: protection)
                default:
                    return NewItem(
                        .key, attributes: [.applicationTag: .data(Data("key\(index)".utf8)), .label: .string("key \(index)")], data: secret,
                        protection: protection)
                }
            }
            try device.keychain(for: app.bundleID).importItems(items)
            let sandbox = try device.sandbox(for: app.bundleID)
            try sandbox.set("user\(number)", forKey: "signedInUser")
            try sandbox.set(number, forKey: "launches")
            for file in 0..<20 {
                let large = file == 0 && number % 30 == 0
                let size = large ? 20 << 20 : 512 + Int(generator.next() % UInt64(16 << 10))
                try sandbox.writeFile(
                    "data/file\(file).bin", Data(entropy.bytes(size)), protection: file % 3 == 0 ? .complete : .completeUntilFirstUserAuthentication)
            }
        }
        return device
    }

    /// `N files (M MB)` of the device's sandboxes.
    private static func fileSummary(_ device: Device) -> String {
        let files = (try? device.installedApps().flatMap { app in (try? device.sandbox(for: app.bundleID).files()) ?? [] }) ?? []
        let bytes = files.reduce(0) { $0 + $1.bytes }
        return "\(files.count) files (\(bytes >> 20) MB)"
    }

    /// How many items the restored device holds (its restore ran in another process).
    private static func restoredCount(_ target: URL, passcode: String) throws -> Int {
        let device = try Device.powerOn(at: target)
        defer { device.powerOff() }
        return try device.status().itemCount
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
