import ArgumentParser
import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// Backup create, verify and restore of a populated device, against `restic backup` of the
/// same device directory and `restic restore` of that snapshot, in the same run.
struct BackupBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up, verify and restore a device of N items and M MB of sandbox files, against restic (run with -c release).",
        discussion: """
            Targets: backup create at most 0.5x the time of `restic backup` of the same device directory \
            to a fresh local repository, an archive no larger than that repository, and restore onto a \
            new device at most 1.0x `restic restore` of that snapshot. restic comes from Debian \
            (scripts/bench installs it); without it the comparison is skipped.
            """)

    @Option(help: "Keychain items (mixed classes and protections, 256-byte secrets).") var items = 100_000
    @Option(help: "Megabytes of sandbox files.") var sandboxMB = 50
    @Option(help: "Backups by each tool, interleaved; the medians are compared.") var runs = 3
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
        let password = Data("bench backup password".utf8)

        let phone = root.appendingPathComponent("phone")
        let source = try populatedBenchDevice(at: phone, passcode: passcode, items: items, sandboxMB: sandboxMB)
        // Runs alternate which tool goes first, and medians are compared: the machine is shared.
        var creates: [Double] = []
        var restics: [(seconds: Double, bytes: Int)] = []
        let archive = root.appendingPathComponent("phone.kfbackup")
        for run in 0..<runs {
            try? FileManager.default.removeItem(at: archive)
            try alternating(
                run, { creates.append(try seconds { try DeviceBackup.create(from: source, to: archive, mode: .encrypted(password: password)) }) },
                { if let figures = try Restic(repository: root.appendingPathComponent("restic-\(run)")).backup(phone) { restics.append(figures) } })
        }
        source.powerOff()
        let create = median(creates)
        let verify = try seconds { _ = try ArchiveReader(contentsOf: archive).read(password: password) }
        var restores: [Double] = []
        var resticRestores: [Double] = []
        var restored = 0
        for run in 0..<runs {
            let target = root.appendingPathComponent("new-phone-\(run)")
            try Device.initialize(at: target, options: DeviceOptions(name: "New iPhone", passcode: passcode))
            try alternating(
                run,
                {
                    restores.append(
                        try seconds {
                            restored = try DeviceRestore.restore(archive, password: password, to: target, passcode: passcode, acceptingUnauthenticated: true)
                                .restoredCount
                        })
                },
                {
                    let snapshot = Restic(repository: root.appendingPathComponent("restic-\(run)"))
                    if let seconds = try snapshot.restore(to: root.appendingPathComponent("restic-restored-\(run)")) { resticRestores.append(seconds) }
                })
        }
        let restore = median(restores)
        let archiveBytes = try size(of: archive)
        let restic = restics.isEmpty ? nil : (seconds: median(restics.map(\.seconds)), bytes: restics[0].bytes)
        let resticRestore = resticRestores.isEmpty ? nil : median(resticRestores)

        var figures: [String: Any] = [
            "items": items, "sandboxMB": sandboxMB, "runs": runs, "createSeconds": create, "createRuns": creates,
            "verifySeconds": verify, "restoreSeconds": restore, "restoreRuns": restores, "restoredItems": restored, "archiveBytes": archiveBytes,
        ]
        if let restic {
            figures["resticSeconds"] = restic.seconds
            figures["resticRuns"] = restics.map(\.seconds)
            figures["resticRepositoryBytes"] = restic.bytes
        }
        if let resticRestore {
            figures["resticRestoreSeconds"] = resticRestore
            figures["resticRestoreRuns"] = resticRestores
        }
        if json {
            printJSON(figures)
            return
        }
        print("device: \(items) items, \(sandboxMB) MB of sandbox files; medians of \(runs) interleaved runs")
        if let restic {
            print(String(format: "restic backup            %7.2f s   (= 1.00)   repository %7.1f MB (= 1.00)", restic.seconds, Double(restic.bytes) / 1e6))
            print(
                String(
                    format: "keyferry backup create   %7.2f s   %.2fx      archive    %7.1f MB  %.2fx   (targets <= 0.50x, <= 1.00x)",
                    create, create / restic.seconds, Double(archiveBytes) / 1e6, Double(archiveBytes) / Double(restic.bytes)))
        } else {
            print(
                String(
                    format: "keyferry backup create   %7.2f s              archive    %7.1f MB   (restic not installed: apt-get install restic)",
                    create, Double(archiveBytes) / 1e6))
        }
        print(String(format: "keyferry backup verify   %7.2f s", verify))
        if let resticRestore {
            print(String(format: "restic restore           %7.2f s   (= 1.00)", resticRestore))
            print(
                String(
                    format: "keyferry restore         %7.2f s   %.2fx      (%d items onto a new device; target <= 1.00x)", restore, restore / resticRestore,
                    restored))
        } else {
            print(String(format: "keyferry restore         %7.2f s   (%d items restored onto a new device)", restore, restored))
        }
    }

    private func size(of file: URL) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
    }

    /// `restic backup` of a directory into a fresh repository, if restic is installed.
    private struct Restic {
        let repository: URL

        private let password = ["RESTIC_PASSWORD": "bench"]
        private var restic: URL? {
            ["/usr/bin/restic", "/usr/local/bin/restic"].first(where: FileManager.default.isExecutableFile(atPath:)).map(URL.init(fileURLWithPath:))
        }

        func backup(_ directory: URL) throws -> (seconds: Double, bytes: Int)? {
            guard let restic else { return nil }
            try runQuietly(restic, ["init", "--repo", repository.path], environment: password)
            let seconds = try seconds { try runQuietly(restic, ["backup", "--repo", repository.path, directory.path], environment: password) }
            var bytes = 0
            let enumerator = FileManager.default.enumerator(at: repository, includingPropertiesForKeys: [.fileSizeKey])
            while let file = enumerator?.nextObject() as? URL { bytes += (try file.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0 }
            return (seconds, bytes)
        }

        /// `restic restore` of the repository's snapshot into `target`; nil without restic or
        /// without the snapshot `backup` made.
        func restore(to target: URL) throws -> Double? {
            guard let restic, FileManager.default.fileExists(atPath: repository.path) else { return nil }
            return try seconds { try runQuietly(restic, ["restore", "latest", "--repo", repository.path, "--target", target.path], environment: password) }
        }
    }
}

/// A device of `items` items spread over classes, protection classes and four apps, with
/// `sandboxMB` of incompressible sandbox files: what the backup and survival benchmarks measure.
func populatedBenchDevice(at directory: URL, passcode: String, items: Int, sandboxMB: Int, biometry: Bool = false) throws -> Device {
    let device = try Device.create(at: directory, options: DeviceOptions(name: "Bench iPhone", passcode: passcode, enrollBiometry: biometry))
    try populate(device, items: items, sandboxMB: sandboxMB)
    return device
}

/// Adds `items` items and `sandboxMB` of files to a new device, as `populatedBenchDevice` does.
func populate(_ device: Device, items: Int, sandboxMB: Int) throws {
    let apps = (0..<4).map { AppManifest(bundleID: "com.example.app\($0)", teamID: "BENCH12345") }
    for app in apps { try device.install(app) }
    let protections: [ProtectionClass] = [
        .whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly,
        .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly,
    ]
    let entropy = SystemEntropy()
    for start in stride(from: 0, to: items, by: 5_000) {
        let batch = (start..<min(start + 5_000, items)).map { index -> NewItem in
            let protection = protections[index % protections.count]
            let secret = Data(entropy.bytes(256))
            switch index % 3 {
            case 0:
                return NewItem(
                    .genericPassword, attributes: [.account: .string("user\(index)"), .service: .string("bench")], data: secret, protection: protection)
            case 1:
                return NewItem(
                    .internetPassword, attributes: [.account: .string("user\(index)"), .server: .string("host\(index % 97).example.com")],
                    data: secret, protection: protection)
            default: return NewItem(.key, attributes: [.applicationTag: .data(Data("key\(index)".utf8))], data: secret, protection: protection)
            }
        }
        try device.keychain(for: apps[(start / 5_000) % apps.count].bundleID).importItems(batch)
    }
    let fileBytes = 1 << 20
    for index in 0..<sandboxMB {
        try device.sandbox(for: apps[index % apps.count].bundleID).writeFile("blob\(index).bin", Data(entropy.bytes(fileBytes)))
    }
}
