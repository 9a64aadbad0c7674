import Backup
public import Foundation
public import KeychainModel
public import KeychainStore
import KeyferryCrypto
@_exported import KeyferrySecurity
import KeyferryThreads

/// A simulated iPhone for a test: a fresh device in a temporary directory, unlocked, with a
/// manual clock and the cheapest passcode hashing, removed when the value goes away.
///
///     let phone = try SimulatedDevice(passcode: "123456")
///     let app = try phone.install("com.example.notes")
///     try app.run { try TokenStore().save("t0k3n") }     // your code, calling SecItemAdd
///     try phone.lock()
///     app.run { #expect(TokenStore().read() == nil) }     // -25308 for a WhenUnlocked item
///
/// Every app it installs is a `KeyferryContext`: run your code in it, queue the user's
/// answers to prompts, make its next calls fail, or kill it between two calls (`launch`).
public final class SimulatedDevice: Sendable {
    /// The device's directory (its database, the apps' sandboxes, the audit log).
    public let directory: URL
    /// The passcode the device has now, which also answers the simulated user's prompts.
    public var passcode: String? { state.withLock { $0.passcode } }
    /// The device's time: moves only when the test moves it.
    public let clock: ManualClock
    package let device: Device
    private let root: URL
    private let state: Locked<State>

    private struct State {
        var passcode: String?
        var apps: [String: KeyferryContext] = [:]
        var latency = KeyferryContext.Latency()
    }

    /// A new device, unlocked. `gracePeriod` is how long after a lock the device still reads
    /// `WhenUnlocked` items, as iOS's "Require Passcode" setting. `profile` makes it the iOS
    /// Simulator (no passcode) or a Mac, whose SecItem calls reach its file-based keychain
    /// unless they set `kSecUseDataProtectionKeychain` (Protocol/profiles.md).
    public convenience init(
        name: String = "Test iPhone", passcode: String? = "123456", biometry: Bool = false, gracePeriod: TimeInterval = 0,
        profile: DeviceProfile = .iphone
    ) throws {
        let root = Self.temporaryRoot()
        let clock = ManualClock()
        let options = DeviceOptions(
            name: name, passcode: passcode, enrollBiometry: biometry, gracePeriod: gracePeriod,
            passcodeHashing: .minimum, profile: profile)
        let device = try Device.create(at: root.appendingPathComponent("device"), options: options, clock: clock)
        self.init(root: root, clock: clock, device: device, passcode: passcode)
    }

    private init(root: URL, clock: ManualClock, device: Device, passcode: String?) {
        self.root = root
        self.clock = clock
        self.device = device
        directory = device.directory
        state = Locked(State(passcode: passcode))
    }

    private static func temporaryRoot() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-\(UUID().uuidString)")
    }

    deinit {
        flushAudits()
        device.powerOff()
        try? FileManager.default.removeItem(at: root)
    }

    // MARK: Apps

    /// Installs an app (or updates it: the same bundle under another team is an app transfer)
    /// and returns it, ready to run code in. Without `accessGroups` the app's keychain group
    /// is `TEAM.bundleID`, as Xcode sets it up; `group.…` entries are app groups, whose shared
    /// container and UserDefaults suite the app and its extensions reach. `extensionOf` makes
    /// it an app extension (a widget) of an installed app, removed with it. `appIDPrefix` is an
    /// App ID prefix other than the team ID (an app registered before 2011): its own group is
    /// then `PREFIX.bundleID`. `uikitOnMac` on a Mac makes it a Mac Catalyst app (or an iPhone
    /// app on an Apple silicon Mac): its calls reach the data protection keychain alone.
    @discardableResult
    public func install(
        _ bundleID: String, team: String = "ABCDE12345", accessGroups: [String] = [], keychainEntitlement: Bool = true,
        extensionOf containingApp: String? = nil, appIDPrefix: String? = nil, uikitOnMac: Bool = false
    ) throws -> KeyferryContext {
        try device.install(
            AppManifest(
                bundleID: bundleID, teamID: team, accessGroups: accessGroups,
                hasKeychainEntitlement: keychainEntitlement, containingApp: containingApp, appIDPrefix: appIDPrefix, uikitOnMac: uikitOnMac))
        return app(bundleID)
    }

    /// An installed app, the same context every time.
    public func app(_ bundleID: String) -> KeyferryContext {
        state.withLock { state in
            if let app = state.apps[bundleID] { return app }
            let app = KeyferryContext(device: device, app: bundleID, passcode: { [weak self] in self?.passcode })
            app.simulateLatency(state.latency)
            state.apps[bundleID] = app
            return app
        }
    }

    /// How long every app's Keychain Services calls and prompts keep their caller waiting, as
    /// securityd and the user do on a phone (`KeyferryContext.simulateLatency`): code that makes
    /// them on the main actor freezes for that long, and the audit names each such call.
    public func simulateLatency(call: Duration = .zero, prompt: Duration = .zero) {
        let latency = KeyferryContext.Latency(call: call, prompt: prompt)
        let apps = state.withLock { state in
            state.latency = latency
            return Array(state.apps.values)
        }
        for app in apps { app.simulateLatency(latency) }
    }

    /// Deletes the app: its sandbox goes, its keychain items stay (as on iOS).
    public func uninstall(_ bundleID: String) throws {
        try device.uninstall(bundleID: bundleID)
    }

    // MARK: Lock, power, time

    // As iOS, UIApplication's notifications follow the lock: "will become unavailable" when the
    // device locks or restarts with protected data available (the grace period is the "will"),
    // "did become available" when an unlock makes it available again. Without a passcode the
    // data never becomes unavailable, and nothing is posted.

    /// Locks the device. `immediately` skips the grace period.
    public func lock(immediately: Bool = true) throws {
        if passcode != nil, isProtectedDataAvailable { post(UIApplication.protectedDataWillBecomeUnavailableNotification) }
        try device.lock(immediately: immediately)
    }

    /// Unlocks with the device's passcode, or with `passcode` (a wrong one fails with
    /// `errSecAuthFailed` and counts as a failed attempt).
    public func unlock(passcode: String? = nil) throws {
        let before = isProtectedDataAvailable
        try device.unlock(passcode: passcode ?? self.passcode)
        if !before, isProtectedDataAvailable { post(UIApplication.protectedDataDidBecomeAvailableNotification) }
    }

    /// Restarts the device: before first unlock until `unlock`, when it has a passcode.
    public func reboot() throws {
        if passcode != nil, isProtectedDataAvailable { post(UIApplication.protectedDataWillBecomeUnavailableNotification) }
        try device.reboot()
    }

    /// Moves the device's clock forward (past a grace period, a token's expiry).
    public func advanceClock(by seconds: TimeInterval) { clock.advance(by: seconds) }

    /// `UIApplication.isProtectedDataAvailable`: whether files with complete protection can be read now.
    public var isProtectedDataAvailable: Bool { (try? device.status().protectedDataAvailable) ?? false }

    private func post(_ name: Notification.Name) { NotificationCenter.default.post(name: name, object: self) }

    // MARK: Passcode and biometry

    /// Sets the passcode, or changes it; the device must be unlocked.
    public func setPasscode(_ newPasscode: String) throws {
        try device.setPasscode(newPasscode, current: passcode)
        state.withLock { $0.passcode = newPasscode }
    }

    /// Removes the passcode: every `WhenPasscodeSetThisDeviceOnly` item is deleted and biometry
    /// turns off, as on iOS.
    public func removePasscode() throws {
        guard let current = passcode else { return }
        try device.removePasscode(current: current)
        state.withLock { $0.passcode = nil }
    }

    /// Enrols a face or finger (the device needs a passcode).
    public func enrollBiometry() throws { try device.enrollBiometry() }

    /// A new face or finger joins the enrolment: `biometryCurrentSet` items become unreadable,
    /// and `LAContext.evaluatedPolicyDomainState` changes.
    public func changeBiometryEnrollment() throws { try device.changeBiometryEnrollment() }

    public func removeBiometry() throws { try device.removeBiometry() }

    // MARK: Backup and restore

    /// Encrypted under a password (its keychain items, but for ThisDeviceOnly ones, restore
    /// onto any device), or unencrypted (its keychain items restore only onto the device that
    /// made it).
    public enum BackupKind: Sendable {
        case encrypted(password: String)
        case unencrypted
    }

    /// Backs this device up and restores the backup onto a new device with the same passcode,
    /// as a user setting up a new phone does; the new device comes up unlocked with the apps
    /// of the backup. `report` says what the restore dropped and why.
    public func restoreBackupOntoNewDevice(_ kind: BackupKind = .encrypted(password: "backup-password"), name: String = "New iPhone")
        throws -> (device: SimulatedDevice, report: RestoreReport)
    {
        let archive = root.appendingPathComponent("backup-\(UUID().uuidString).kfbackup")
        defer { try? FileManager.default.removeItem(at: archive) }
        let password: Data?
        switch kind {
        case .encrypted(let text):
            password = Data(text.utf8)
            try DeviceBackup.create(from: device, to: archive, mode: .encrypted(password: Data(text.utf8), parameters: .minimum))
        case .unencrypted:
            password = nil
            try DeviceBackup.create(from: device, to: archive, mode: .unencrypted)
        }
        // The new phone is set up with the same passcode, then restored: a restore replaces the
        // device's directory, so it is powered on afresh afterwards.
        let targetRoot = Self.temporaryRoot()
        let targetClock = ManualClock(clock.now())
        let directory = targetRoot.appendingPathComponent("device")
        do {
            let options = DeviceOptions(name: name, passcode: passcode, gracePeriod: device.info.gracePeriod, passcodeHashing: .minimum)
            try Device.initialize(at: directory, options: options, clock: targetClock)
            // Written just above: its origin is known.
            let report = try DeviceRestore.restore(archive, password: password, to: directory, passcode: passcode, acceptingUnauthenticated: true)
            let restored = try Device.powerOn(at: directory, clock: targetClock)
            try restored.unlock(passcode: passcode)
            return (SimulatedDevice(root: targetRoot, clock: targetClock, device: restored, passcode: passcode), report)
        } catch {
            try? FileManager.default.removeItem(at: targetRoot)
            throw error
        }
    }

    // MARK: Audit

    /// Records the adds each app still holds back (their duplicate not yet handled).
    private func flushAudits() {
        for app in state.withLock({ Array($0.apps.values) }) { app.flushAudit() }
    }

    /// Every trap the apps' calls fell into on this device, by place in the code.
    public func traps() throws -> [AuditReport.Finding] {
        flushAudits()
        return try AuditLog(device: directory).read().findings
    }

    /// Throws `TrapsFound`, which lists each trap with its file and line, when the apps' calls
    /// fell into any: `try phone.requireNoTraps()` fails a swift-testing or XCTest test.
    public func requireNoTraps() throws {
        let found = try traps()
        if !found.isEmpty { throw TrapsFound(findings: found) }
    }
}

/// The keychain traps a test's code fell into.
public struct TrapsFound: Error, CustomStringConvertible {
    public var findings: [AuditReport.Finding]

    public var description: String {
        (["the code fell into \(findings.count) keychain trap(s):"]
            + findings.map { "\($0.file):\($0.line): \($0.title) (\($0.function.rawValue), \($0.count)x): \($0.why)" })
            .joined(separator: "\n")
    }
}
