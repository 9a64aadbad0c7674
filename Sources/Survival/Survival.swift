import Backup
package import Foundation
import KeychainModel
package import KeychainStore
import KeyferryCrypto
import KeyferryThreads
import Relay
import Sync
import SyncWire

/// Runs every `SurvivalPath` for real and reads each secret afterwards: on copies of the device
/// (`Device.fork`) for what happens to it, and on new scratch devices for what reaches another
/// one. The device itself is only read, once, to copy it.
package enum Survival {
    package struct Options: Sendable {
        /// Only the secrets this app can read: its entitled groups and its sandbox.
        package var app: String?
        /// The device's passcode, when the caller knows it: checked once on the device itself,
        /// counted and delayed like any unlock, then it answers access-control prompts and
        /// removes the passcode on copies of the device, as a user would.
        package var passcode: String?
        /// Where scratch devices are made (`scratch(of:)`); all of them are removed at the end.
        package var scratch: URL

        package init(app: String? = nil, passcode: String? = nil, scratch: URL) {
            self.app = app
            self.passcode = passcode
            self.scratch = scratch
        }
    }

    /// Where the matrix of the device in `directory` makes its scratch devices: inside the
    /// device's own directory, so its hardware UID is copied nowhere else, and removed whole by
    /// `removeScratch` whenever the device is held and no matrix runs (a node starting).
    package static func scratch(of directory: URL) -> URL { directory.appendingPathComponent("survival-scratch", isDirectory: true) }

    /// Removes what a matrix cut short (its node killed) left in the device's directory. Only
    /// for whoever holds the device, when no matrix can be running.
    package static func removeScratch(of directory: URL) {
        try? FileManager.default.removeItem(at: scratch(of: directory))
    }

    /// The matrix of `device`, which must be powered on and unlocked, or locked with its
    /// passcode given: the matrix then starts from a copy unlocked with it, and the device
    /// stays locked. Paths run side by side, as long jobs of the device's copy.
    package static func matrix(of device: Device, options: Options) async throws -> SurvivalMatrix {
        let passcode = try device.passcodeIsSet() ? options.passcode : nil
        let locked = device.lockState != .unlocked
        guard !locked || passcode != nil else {
            throw DeviceError(
                .protectedDataUnavailable,
                "\(device.info.name) is locked, so its secrets cannot be read; unlock it first, or give its passcode.")
        }
        if let app = options.app { _ = try device.app(app) }
        // Guesses count here, on the device, never only on its copies.
        if let passcode, !locked { try await device.run { try $0.checkPasscode(passcode) } }
        let work = options.scratch.appendingPathComponent("survival-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: work) }

        let (now, (secrets, damaged), status) = try await device.longJob { device, _ in
            let directory = work.appendingPathComponent("now")
            let now = try locked ? device.fork(to: directory, unlockingWith: passcode!) : device.fork(to: directory)
            return (now, try Secret.all(on: now, app: options.app, passcode: passcode), try now.status())
        }
        let runner = PathRunner(
            now: now, work: work, secrets: secrets, passcode: passcode,
            passcodeSet: status.passcodeSet, biometryEnrolled: status.biometryEnrolled,
            archives: Archives(of: now, in: work))
        var cells: [SurvivalPath: [SurvivalCell]] = [:]
        var notRun: [SurvivalPath: String] = [:]
        try await withThrowingTaskGroup(of: (SurvivalPath, PathResult).self) { group in
            for path in SurvivalPath.allCases {
                group.addTask { (path, try await runner.run(path)) }
            }
            for try await (path, result) in group {
                switch result {
                case .cells(let column): cells[path] = column
                case .notRun(let why): notRun[path] = why
                }
            }
        }
        let paths = SurvivalPath.allCases.filter { cells[$0] != nil }
        let rows = secrets.enumerated().map { index, secret in
            var row = secret.row
            for path in paths { row.cells[path] = cells[path]![index] }
            return row
        }
        return SurvivalMatrix(
            device: device.info.name, app: options.app, paths: paths, notRun: notRun, rows: rows, damaged: damaged.map(\.description))
    }
}

enum PathResult: Sendable {
    case cells([SurvivalCell])
    /// The path cannot happen on this device, and why.
    case notRun(String)
}

/// Runs one path on scratch devices beside `now` (a fork of the device) and reads every secret.
struct PathRunner: Sendable {
    let now: Device
    let work: URL
    let secrets: [Secret]
    let passcode: String?
    let passcodeSet: Bool
    let biometryEnrolled: Bool
    let archives: Archives

    func run(_ path: SurvivalPath) async throws -> PathResult {
        switch path {
        case .iCloudKeychain where !now.info.profile.hasICloudKeychain: return .notRun("the iOS Simulator has no iCloud Keychain")
        case .iCloudKeychain: return try await iCloudKeychain()
        case .encryptedBackupNewDevice, .unencryptedBackupNewDevice, .encryptedBackupSameDevice, .unencryptedBackupSameDevice, .quickStart:
            if let reason = now.info.profile.withoutIphoneMigration { return .notRun(reason) }
            return try await now.longJob { _, _ in try onThread(path) }
        case .passcodeRemoved where !passcodeSet: return .notRun("the device has no passcode to remove")
        case .biometryReenrolled where !biometryEnrolled: return .notRun("no biometry is enrolled on the device")
        default: return try await now.longJob { _, _ in try onThread(path) }
        }
    }

    private func onThread(_ path: SurvivalPath) throws -> PathResult {
        switch path {
        case .encryptedBackupNewDevice, .encryptedBackupSameDevice, .unencryptedBackupNewDevice, .unencryptedBackupSameDevice:
            let encrypted = path == .encryptedBackupNewDevice || path == .encryptedBackupSameDevice
            let archive = try archives.archive(encrypted: encrypted)
            let sameDevice = path == .encryptedBackupSameDevice || path == .unencryptedBackupSameDevice
            let target = sameDevice ? try fork(path) : try newDevice(path)
            let report = try DeviceRestore.restore(archive.url, password: archive.password, into: target.device, acceptingUnauthenticated: true)
            return .cells(read(path, on: target, report: report))
        case .quickStart:
            let target = try newDevice(path)
            let report = try DeviceTransfer.transfer(from: now, into: target.device)
            return .cells(read(path, on: target, report: report))
        case .passcodeRemoved:
            let target = try fork(path)
            // A Security Delay would postpone the change, not prevent it.
            try target.device.dropSecurityDelay()
            if let passcode {
                try target.device.removePasscode(current: passcode)
            } else {
                try target.device.removePasscodeWithKeysInMemory()
            }
            return .cells(read(path, on: Target(device: target.device, passcode: nil)))
        case .biometryReenrolled:
            let target = try fork(path)
            try target.device.dropSecurityDelay()
            try target.device.changeBiometryEnrollment()
            return .cells(read(path, on: target))
        case .appTransferred:
            let target = try fork(path)
            for app in try appsOfSecrets(on: target.device) {
                try target.device.install(app.transferred(to: app.teamID == "TRANSFER01" ? "TRANSFER02" : "TRANSFER01"))
            }
            return .cells(read(path, on: target))
        case .appReinstalled:
            // Deleting an app deletes its extensions; the App Store puts both back.
            let target = try fork(path)
            let installed = try target.device.installedApps()
            let apps = Set(try appsOfSecrets(on: target.device).map { $0.containingApp ?? $0.bundleID })
            for app in installed where apps.contains(app.bundleID) {
                try target.device.uninstall(bundleID: app.bundleID)
                for reinstalled in [app] + installed.filter({ $0.containingApp == app.bundleID }) { try target.device.install(reinstalled) }
            }
            return .cells(read(path, on: target))
        case .beforeFirstUnlock:
            let target = try fork(path)
            try target.device.reboot()
            return .cells(read(path, on: target))
        case .lockedAfterGrace:
            let target = try fork(path)
            try target.device.lock()
            try target.device.advanceClock(by: now.info.gracePeriod + 1)
            return .cells(read(path, on: target))
        case .iCloudKeychain:
            preconditionFailure("iCloud Keychain runs on the cooperative pool: its engine is an actor")
        }
    }

    /// A new device joins a circle with a copy of this one, through a relay in this process;
    /// both sync until nothing moves.
    private func iCloudKeychain() async throws -> PathResult {
        let path = SurvivalPath.iCloudKeychain
        let (source, target, transport) = try await now.longJob { _, _ in
            let source = try fork(path, name: "\(path.rawValue)-this-device")
            let target = try newDevice(path)
            // The user installs the same apps on the new phone; their data does not come along.
            for app in try source.device.installedApps() { try target.device.install(app) }
            let storage = try SQLiteRelayStorage(directory: work.appendingPathComponent("\(path.rawValue)-relay"))
            return (source, target, LocalRelay(storage: storage))
        }
        let relay = URL(string: "local:survival")!
        let sponsor = try await SyncEngine.create(device: source.device, name: "this device", relay: relay, transport: transport)
        let voucher = try await sponsor.vouch(for: try SyncEngine.peerIdentity(of: target.device, name: "new device"))
        let joiner = try await SyncEngine.join(voucher, device: target.device, transport: transport)
        for _ in 0..<100 {
            let pushed = try await sponsor.sync().pushed
            let applied = try await joiner.sync().applied
            if pushed == 0 && applied == 0 { break }
        }
        return .cells(try await now.longJob { _, _ in read(path, on: target) })
    }

    // MARK: Scratch devices

    struct Target: Sendable {
        var device: Device
        /// The passcode that answers prompts on it.
        var passcode: String?
    }

    /// A copy of the device. Its owner knows its passcode and types it at a prompt (an item of
    /// `biometryCurrentSet|or|devicePasscode` after a new face): when the matrix was not given
    /// the passcode, the copy gets one of the matrix's own, with the same class keys.
    private func fork(_ path: SurvivalPath, name: String? = nil) throws -> Target {
        let device = try now.fork(to: work.appendingPathComponent(name ?? path.rawValue))
        guard passcode == nil, passcodeSet, now.info.profile.hasPasscodeSetting else { return Target(device: device, passcode: passcode) }
        let stand = UUID().uuidString
        try device.replacePasscodeWithKeysInMemory(stand)
        return Target(device: device, passcode: stand)
    }

    /// A new device of the same profile as its owner sets it up: a passcode if the old one had
    /// one (a random one: hashed at the cheapest cost, the real one would be easy to recover
    /// from it), and biometry likewise.
    private func newDevice(_ path: SurvivalPath) throws -> Target {
        let profile = now.info.profile
        let newPasscode = passcodeSet && profile.hasPasscodeSetting ? UUID().uuidString : nil
        let options = DeviceOptions(
            name: "new device", passcode: newPasscode, enrollBiometry: biometryEnrolled && (newPasscode != nil || profile.reportsPasscodeSet),
            gracePeriod: now.info.gracePeriod, passcodeHashing: .minimum, profile: profile)
        return Target(device: try Device.create(at: work.appendingPathComponent("\(path.rawValue)-new"), options: options), passcode: newPasscode)
    }

    /// The apps whose secrets are in the matrix, as installed on `device`.
    private func appsOfSecrets(on device: Device) throws -> [AppManifest] {
        let bundles = Set(secrets.compactMap(\.row.app))
        return try device.installedApps().filter { bundles.contains($0.bundleID) }
    }

    private func read(_ path: SurvivalPath, on target: Target, report: RestoreReport? = nil) -> [SurvivalCell] {
        let outcomes = report.map { Dictionary($0.items.map { ($0.uuid, $0) }, uniquingKeysWith: { a, _ in a }) } ?? [:]
        let reader = Secret.Reader(target.device, passcode: target.passcode)
        return secrets.map { secret in
            var cell = secret.cell(with: reader)
            // A secret that fails here as on the device itself keeps that reason.
            if cell.outcome != .kept, cell.reason == nil || cell.reason != secret.row.now?.reason {
                cell.reason = LossReason.explain(secret, path, cell, restored: secret.uuid.flatMap { outcomes[$0] }) ?? cell.reason
            }
            return cell
        }
    }
}

/// The encrypted and the unencrypted backup of `now`, each written once, by whichever of its two
/// paths (onto a new device, onto this one) asks first; the other waits for it.
final class Archives: Sendable {
    typealias Archive = (url: URL, password: Data?)
    private let device: Device
    private let directory: URL
    private let encrypted = Locked<Archive?>(nil)
    private let unencrypted = Locked<Archive?>(nil)

    init(of device: Device, in directory: URL) {
        self.device = device
        self.directory = directory
    }

    func archive(encrypted wanted: Bool) throws -> Archive {
        wanted ? try encrypted.withLock { try make(&$0, encrypted: true) } : try unencrypted.withLock { try make(&$0, encrypted: false) }
    }

    private func make(_ made: inout Archive?, encrypted: Bool) throws -> Archive {
        if let made { return made }
        let url = directory.appendingPathComponent(encrypted ? "encrypted.archive" : "unencrypted.archive")
        if encrypted {
            made = (url, try DeviceBackup.createUnderRandomKey(from: device, to: url))
        } else {
            try DeviceBackup.create(from: device, to: url, mode: .unencrypted)
            made = (url, nil)
        }
        return made!
    }
}
