public import Foundation
import GRDB
public import KeychainModel
public import KeyferryCrypto
import KeyferrySystem
import KeyferryThreads

/// One simulated Apple device: a directory at rest, and while powered on the class keys in
/// memory and the lock-state machine. Thread-safe; every method may be called from any task.
public final class Device: Sendable {
    public let info: DeviceInfo
    let layout: DeviceLayout
    let database: KeychainDatabase
    let keybag: Keybag
    let index: ItemIndex
    let clock: any DeviceClock
    let entropy: any EntropySource
    /// Bind this device's backups to it: items that may come back only here, and the sections
    /// of its unencrypted archives.
    package let backupKeys: DeviceBackupKeys
    /// nil while powered off.
    private let power: Locked<LockStateMachine?>
    /// The claim on the directory this device took at power-on, let go at power-off; nil when
    /// the caller holds the directory (`powerOn(holding:)`) or the directory is a fork's scratch.
    private let ownedHold: DeviceHold?
    /// Installed apps as last read, with their keychains' group hashes: every app's call looks
    /// its app up, and only this device's install and uninstall change them (each moves the
    /// generation on, so a read that raced with one is not kept).
    let appCache = Locked(AppCache())
    /// Passcode attempts made inside another transaction (access control), written once it ends.
    private let unsavedAttempts = Locked<PasscodeAttempts?>(nil)
    /// The threads of this device's long jobs, started by the first (`Device+Work.swift`).
    let longJobs = Locked<BlockingPool?>(nil)

    public var directory: URL { layout.root }

    /// The access group where Keyferry keeps the device's own secrets (its sync identity and
    /// circle keys). No app can be entitled to it (groups start with a team ID), and it is
    /// never listed, counted, backed up or replaced by a restore as the user's items are.
    public static let ownAccessGroup = "com.keyferry.sync"

    /// Whether a group is Keyferry's own (`com.keyferry.*`): nothing a backup, an archive or a
    /// transfer carries is ever written there, whatever it claims, since whoever wrote it would
    /// otherwise choose the device's identity.
    public static func isReservedAccessGroup(_ group: String) -> Bool { group.hasPrefix("com.keyferry.") }

    /// The hash the item table files the device's own group under.
    var ownAccessGroupHash: [UInt8] { index.accessGroupHash(Self.ownAccessGroup) }

    init(
        layout: DeviceLayout, info: DeviceInfo, uid: SymmetricKey, database: KeychainDatabase,
        clock: any DeviceClock, entropy: any EntropySource, machine: LockStateMachine?, ownedHold: DeviceHold? = nil
    ) {
        self.ownedHold = ownedHold
        self.layout = layout
        self.info = info
        self.database = database
        self.keybag = Keybag(uid: uid, entropy: entropy)
        self.index = ItemIndex(key: uid.derive(context: "kfindex_"))
        self.backupKeys = DeviceBackupKeys(deviceID: info.id, hardwareUID: uid)
        self.clock = clock
        self.entropy = entropy
        self.power = Locked(machine)
    }

    // MARK: Creating and powering

    /// Creates a device in `directory` (which must not exist, or be empty) and powers it on,
    /// unlocked: for a caller that uses it at once (a test). A failure part-way leaves no device
    /// behind.
    @discardableResult
    public static func create(
        at directory: URL, options: DeviceOptions = DeviceOptions(),
        clock: any DeviceClock = SystemClock(), entropy: any EntropySource = SystemEntropy()
    ) throws -> Device {
        try initialize(at: directory, options: options, clock: clock, entropy: entropy)
        let device = try powerOn(at: directory, clock: clock, entropy: entropy)
        do {
            if let passcode = options.passcode { try device.unlock(passcode: passcode) }
        } catch {
            device.powerOff()
            throw error
        }
        return device
    }

    /// Creates a device in `directory` (which must not exist, or be empty), powered off: what
    /// `keyferry device init` and a fleet do, with no power-on and no unlock to pay for. A
    /// failure part-way leaves no device behind.
    public static func initialize(
        at directory: URL, options: DeviceOptions = DeviceOptions(),
        clock: any DeviceClock = SystemClock(), entropy: any EntropySource = SystemEntropy()
    ) throws {
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: directory.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw DeviceError(.alreadyExists, "\(directory.path) is a file, not a directory; choose a new directory for the device.")
        }
        if let contents = try? files.contentsOfDirectory(atPath: directory.path), !contents.isEmpty {
            if let existing = try? status(at: directory) {
                throw DeviceError(
                    .alreadyExists, "\(directory.path) is already a device (\(existing.name)).", subject: directory.path)
            }
            throw DeviceError(.alreadyExists, "\(directory.path) already exists and is not empty; choose a new directory for the device.")
        }
        guard options.gracePeriod >= 0, options.gracePeriod.isFinite else {
            throw DeviceError(.invalidArgument, "the grace period must be zero or more seconds.")
        }
        if let passcode = options.passcode {
            try requirePasscodeSetting(options.profile)
            try validatePasscode(passcode)
        }
        if options.enrollBiometry && options.passcode == nil && !options.profile.reportsPasscodeSet {
            throw DeviceError(.invalidArgument, "biometry needs a passcode, as on iOS; give the device a passcode too.")
        }
        // Build aside, then move into place: a crash never leaves a half-made device.
        let staging = directory.deletingLastPathComponent()
            .appendingPathComponent(".\(directory.lastPathComponent).creating-\(UUID().uuidString)")
        defer { try? files.removeItem(at: staging) }
        do {
            try files.createDirectory(at: staging, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let layout = DeviceLayout(root: staging)
            let info = DeviceInfo(
                id: UUIDBytes.uuid(entropy.bytes(16)), name: options.name, createdAt: clock.now(), gracePeriod: options.gracePeriod,
                profile: options.profile)
            let uidBytes = entropy.bytes(SymmetricKey.byteCount)
            guard files.createFile(atPath: layout.hardwareUID.path, contents: Data(uidBytes), attributes: [.posixPermissions: 0o600]) else {
                throw DeviceError(.io, "could not write the hardware UID in \(staging.path).")
            }
            try writeInfo(info, to: layout)
            try files.createDirectory(at: layout.apps, withIntermediateDirectories: true)
            let database = try KeychainDatabase(path: layout.database.path)
            let keybag = Keybag(uid: try SymmetricKey(bytes: uidBytes), entropy: entropy)
            try database.write { db in
                _ = try keybag.create(
                    db, passcode: options.passcode, parameters: options.passcodeHashing, passcodeClass: options.profile.reportsPasscodeSet)
                if options.enrollBiometry {
                    try Keybag.saveBiometryEnrollment(entropy.bytes(16), db)
                }
            }
            try database.queue.close()
        } catch let error as DeviceError {
            throw error
        } catch {
            throw DeviceError(.io, "could not create the device in \(directory.path): \(Self.describe(error)).")
        }
        // Of several creations racing for one directory, exactly one wins.
        do {
            try Placement.moveDirectory(staging, to: directory)
        } catch {
            if error.isOccupied {
                throw DeviceError(.alreadyExists, "\(directory.path) already holds a device (made at the same moment); choose a new directory for the device.")
            }
            throw DeviceError(.io, "could not move the new device into \(directory.path): \(error.reason).")
        }
    }

    /// Powers on the device in `directory`, holding it until `powerOff` (a device that another
    /// holds fails with `inUse`): before first unlock if it has a passcode, otherwise unlocked.
    /// Committed items are all there, whatever happened to the last power-on.
    public static func powerOn(
        at directory: URL, clock: any DeviceClock = SystemClock(), entropy: any EntropySource = SystemEntropy()
    ) throws -> Device {
        let hold = try DeviceHold.take(directory)
        do {
            return try powerOn(hold, owned: true, clock: clock, entropy: entropy)
        } catch {
            hold.release()
            throw error
        }
    }

    /// Powers on the device the caller holds (a restore that checks the passcode on it); the
    /// hold stays the caller's at `powerOff`.
    package static func powerOn(
        holding hold: DeviceHold, clock: any DeviceClock = SystemClock(), entropy: any EntropySource = SystemEntropy()
    ) throws -> Device {
        try powerOn(hold, owned: false, clock: clock, entropy: entropy)
    }

    private static func powerOn(_ hold: DeviceHold, owned: Bool, clock: any DeviceClock, entropy: any EntropySource) throws -> Device {
        let directory = hold.directory
        let info = try info(at: directory)
        let layout = DeviceLayout(root: directory)
        let uid = try hardwareUID(in: layout)
        let database: KeychainDatabase
        do {
            database = try KeychainDatabase(path: layout.database.path)
        } catch {
            throw DeviceError(.corrupt, "\(layout.database.path) cannot be opened: \(error)")
        }
        let device = Device(
            layout: layout, info: info, uid: uid, database: database, clock: clock, entropy: entropy, machine: nil, ownedHold: owned ? hold : nil)
        try device.boot()
        return device
    }

    /// The status of the powered-off device in `directory`, read while holding it: what a
    /// client shows of a device no node runs.
    public static func status(at directory: URL) throws -> DeviceStatus {
        let device = try powerOn(at: directory)
        defer { device.powerOff() }
        device.dropPower()
        return try device.status()
    }

    /// What the device in `directory` is (its name and identity), read without powering it on.
    public static func info(at directory: URL) throws -> DeviceInfo {
        try DeviceLayout(root: directory).requireDevice()
        let layout = DeviceLayout(root: directory)
        do {
            let raw = try Data(contentsOf: layout.info)
            let probe = try JSONDecoder().decode(FormatProbe.self, from: raw)
            guard DeviceInfo.formats.contains(probe.format) else {
                throw DeviceError(
                    .unsupportedFormat,
                    "\(directory.path) has device format \(probe.format); this Keyferry reads formats \(DeviceInfo.formats.lowerBound) to \(DeviceInfo.formats.upperBound)."
                )
            }
            return try JSONDecoder.keyferry.decode(DeviceInfo.self, from: raw)
        } catch let error as DeviceError {
            throw error
        } catch {
            throw DeviceError(.corrupt, "\(layout.info.path) is not a readable device description: \(error.localizedDescription)")
        }
    }

    private struct FormatProbe: Decodable { var format: Int }

    static func writeInfo(_ info: DeviceInfo, to layout: DeviceLayout) throws {
        let data = try JSONEncoder.keyferry.encode(info)
        try data.write(to: layout.info, options: .atomic)
    }

    /// A file system failure as a user reads it, without Foundation's wording.
    static func describe(_ error: any Error) -> String {
        if let error = error as? CocoaError, let underlying = error.userInfo[NSUnderlyingErrorKey] as? POSIXError {
            return SystemError.reason(underlying.code.rawValue)
        }
        if let error = error as? POSIXError { return SystemError.reason(error.code.rawValue) }
        return (error as? CocoaError).map { "file system error \($0.code.rawValue)" } ?? "\(error)"
    }

    /// The Simulator has no passcode setting: a test that needs one needs an iPhone profile.
    static func requirePasscodeSetting(_ profile: DeviceProfile) throws {
        guard profile.hasPasscodeSetting else {
            throw DeviceError(
                .invalidArgument,
                "the iOS Simulator has no passcode to set (it has no keystore, so nothing on it is ever locked away); "
                    + "use the iphone profile to test what a passcode changes.")
        }
    }

    /// What iOS takes as a new passcode: four digits at least (its shortest, a 4-digit code).
    package static func validatePasscode(_ passcode: String) throws {
        guard !passcode.isEmpty else {
            throw DeviceError(.invalidArgument, "a passcode cannot be empty; to have none, leave it out.")
        }
        guard passcode.count >= 4 else {
            throw DeviceError(.invalidArgument, "a passcode has at least 4 characters, as on iOS, where a 4-digit code is the shortest.")
        }
    }

    private func boot() throws {
        let (keys, settings) = try database.unsafeRead { db in
            (try keybag.unwrap(db, passcode: nil), try Keybag.Settings.load(db))
        }
        power.withLock {
            $0 = LockStateMachine(bootKeys: keys, passcodeSet: settings.passcodeSet, gracePeriod: info.gracePeriod)
        }
        upgradeRows(keys)
    }

    /// Unlocks with class keys already opened (by the passcode's check).
    func unlock(with keys: [ProtectionClass: ClassKeys]) throws {
        try withPower { $0.unlocked(with: keys) }
        upgradeRows(keys)
    }

    /// Rewrites the format 1 rows `keys` open in the current format. A failure (a full disk)
    /// leaves them as they were: they read as they are, and the next unlock tries again.
    private func upgradeRows(_ keys: [ProtectionClass: ClassKeys]) {
        _ = try? FormatUpgrade.run(database, keys: keys, entropy: entropy)
    }

    /// Power-off: every class key leaves memory. Calls afterwards fail with `errSecNotAvailable`
    /// until `reboot`.
    /// Every class key leaves memory, and the directory is let go (when this device took it).
    public func powerOff() {
        dropPower()
        stopLongJobs()
        ownedHold?.release()
    }

    deinit { stopLongJobs() }

    private func dropPower() {
        power.withLock { $0 = nil }
    }

    /// Power-cycles the device: back to before first unlock (or unlocked, without a passcode).
    /// It stays held throughout.
    public func reboot() throws {
        dropPower()
        try boot()
    }

    // MARK: Lock state

    /// Runs `body` on the lock-state machine after applying elapsed time.
    func withPower<T>(_ body: (inout LockStateMachine) throws -> T) throws -> T {
        let now = clock.now()
        return try power.withLock { machine in
            guard var current = machine else {
                throw KeychainError(.notAvailable, "the device is powered off; power it on first.")
            }
            current.settle(at: now)
            defer { machine = current }
            return try body(&current)
        }
    }

    /// The class keys in memory right now.
    func availableKeys() throws -> [ProtectionClass: ClassKeys] { try withPower { $0.keys } }

    public func passcodeIsSet() throws -> Bool { try withPower { $0.passcodeSet } }

    /// Fails with `errSecNotAvailable` while the device is off.
    private func requirePower() throws { try withPower { _ in } }

    /// Unlocks with the passcode (nil on a device without one). A wrong passcode is
    /// `errSecAuthFailed` and counts a failed attempt (`PasscodeAttempts`).
    public func unlock(passcode: String?) throws { try unlock(passcode: passcode, beforeVerdict: {}) }

    /// `unlock(passcode:)`, running `beforeVerdict` once the passcode is stretched and before
    /// anything is recorded of it: what it throws leaves the device as it was (a restore waits
    /// there for its archive's key, derived meanwhile).
    package func unlock(passcode: String?, beforeVerdict: () throws -> Void) throws {
        guard try passcodeIsSet() else {
            try beforeVerdict()
            let keys = try database.unsafeRead { db in try keybag.unwrap(db, passcode: nil) }
            return try unlock(with: keys)
        }
        guard let passcode else { throw KeychainError(.authFailed, "this device has a passcode; give it to unlock the device.") }
        try unlock(with: try verifyPasscode(passcode, beforeVerdict: beforeVerdict))
    }

    /// Checks a passcode without unlocking anything, counted and delayed as an unlock is: for
    /// whoever is about to use it elsewhere (the survival matrix answers prompts on copies of
    /// the device with it). `errSecAuthFailed` when wrong or while the device waits.
    public func checkPasscode(_ passcode: String) throws {
        _ = try verifyPasscode(passcode)
    }

    /// The one check of a passcode outside other transactions (unlock, passcode changes): the
    /// class keys it opens, or `errSecAuthFailed`, counted as `PasscodeAttempts` says. While the
    /// device waits after failed attempts, nothing is tried. The check and its record are one
    /// write transaction, so concurrent checks run one after another, each seeing the failures
    /// recorded before it: no more guesses than the schedule allows.
    func verifyPasscode(_ passcode: String, beforeVerdict: () throws -> Void = {}) throws -> [ProtectionClass: ClassKeys] {
        try saveAttempts()
        let now = attemptClock.now()
        let outcome = try database.write { db -> Result<[ProtectionClass: ClassKeys], KeychainError> in
            let settings = try Keybag.Settings.load(db)
            var attempts = settings.attempts
            if let wait = attempts.retryAfter(at: now) { return .failure(KeychainError(.authFailed, attempts.disabledMessage(wait))) }
            let key = try keybag.passcodeKey(passcode, settings: settings)
            // Thrown here, the transaction rolls back: nothing recorded, no attempt counted.
            try beforeVerdict()
            let hash = keybag.attemptHash(key)
            if hash != attempts.lastWrong, let keys = try? keybag.unwrap(db, passcodeKey: key) {
                if attempts != PasscodeAttempts() { try Keybag.save(PasscodeAttempts(), db) }
                return .success(keys)
            }
            let counted = attempts.recordWrong(hash, at: now)
            try Keybag.save(attempts, db)
            return .failure(KeychainError(.authFailed, attempts.wrongPasscodeMessage(counted: counted, at: now)))
        }
        return try outcome.get()
    }

    /// The clock passcode back-off is timed on: the device clock without what
    /// `device clock --advance` added (real time, for a node), so that moving the clock, which
    /// needs no passcode, never shortens a wait.
    var attemptClock: any DeviceClock { (clock as? AdvancingClock)?.base ?? clock }

    /// Locks the screen. Class A keys leave memory when the grace period ends, or at once with
    /// `immediately` ("require passcode immediately" and pressing the side button).
    public func lock(immediately: Bool = false) throws {
        let now = clock.now()
        try withPower { $0.lock(at: now, immediately: immediately) }
    }

    /// Where the device is in its lock cycle right now; nil while it is powered off.
    public var lockState: LockState? { try? withPower { $0.state } }

    /// `UIApplication.isProtectedDataAvailable`: false before first unlock and once the grace
    /// period after locking has ended.
    public var isProtectedDataAvailable: Bool {
        (try? withPower { $0.isProtectedDataAvailable }) ?? false
    }

    public func status() throws -> DeviceStatus {
        let (settings, itemCount, security) = try database.unsafeRead { db in
            (try Keybag.Settings.load(db), try ItemTable.liveCount(db, excluding: ownAccessGroupHash), try securitySettings(db))
        }
        let now = clock.now()
        let snapshot = try? withPower { ($0.state, $0.isProtectedDataAvailable, $0.graceRemaining(at: now)) }
        return DeviceStatus(
            name: info.name, id: info.id, poweredOn: snapshot != nil, lockState: snapshot?.0,
            protectedDataAvailable: snapshot?.1 ?? false, graceRemaining: snapshot?.2,
            passcodeSet: settings.passcodeSet, biometryEnrolled: settings.biometryEnrollment != nil,
            biometryDomainState: settings.biometryEnrollment.map { Data(ContentDigest.of(Data("keyferry biometry domain".utf8) + $0)) },
            failedPasscodeAttempts: settings.attempts.failed, passcodeRetryAfter: settings.attempts.retryAfter(at: attemptClock.now()),
            itemCount: itemCount, profile: info.profile, security: security)
    }

    // MARK: Passcode

    /// Sets or changes the passcode. The device must be unlocked, and `current` must be the
    /// present passcode when there is one.
    public func setPasscode(_ newPasscode: String, current: String?) throws {
        try Self.requirePasscodeSetting(info.profile)
        try Self.validatePasscode(newPasscode)
        try changePasscode(to: newPasscode, current: current)
    }

    /// Removes the passcode. This destroys the `whenPasscodeSetThisDeviceOnly` class key and
    /// deletes every item of that class, unrecoverably, and turns biometry off, as on iOS.
    public func removePasscode(current: String) throws {
        try changePasscode(to: nil, current: current)
    }

    /// Removes the passcode with the class keys in memory, without asking for it: for a fork
    /// (`fork(to:clock:)`) of an unlocked device whose passcode the caller does not know.
    package func removePasscodeWithKeysInMemory() throws {
        try changePasscode(to: nil, current: nil, alreadyVerified: true)
    }

    /// Gives such a fork a passcode of the caller's own, the class keys in memory re-wrapped
    /// under it: what its owner would type at a prompt there, known to the caller.
    package func replacePasscodeWithKeysInMemory(_ passcode: String) throws {
        try changePasscode(to: passcode, current: nil, alreadyVerified: true)
    }

    private func changePasscode(to newPasscode: String?, current: String?, alreadyVerified: Bool = false) throws {
        let keys = try withPower { machine -> [ProtectionClass: ClassKeys] in
            guard machine.state == .unlocked else {
                throw KeychainError(.interactionNotAllowed, "the device is locked; unlock it before changing the passcode.")
            }
            return machine.keys
        }
        var delaySpent = false
        if try passcodeIsSet(), !alreadyVerified {
            guard let current else { throw KeychainError(.authFailed, "give the current passcode to change it.") }
            _ = try verifyPasscode(current)
            delaySpent = try passSecurityDelay(.passcode)
        }
        let newKeys = try database.write { db -> [ProtectionClass: ClassKeys] in
            let settings = try Keybag.Settings.load(db)
            if !settings.passcodeSet && newPasscode == nil {
                throw DeviceError(.invalidArgument, "the device has no passcode to remove.")
            }
            if newPasscode == nil {
                try database.saveChangeCounter(db)
                try ItemTable.deleteAll(db, protection: .whenPasscodeSetThisDeviceOnly)
                try Keybag.saveBiometryEnrollment(nil, db)
            }
            return try keybag.rewrap(db, keys: keys, newPasscode: newPasscode)
        }
        // The keys wrapped under the old passcode leave the disk, not only the table.
        database.eraseDeletedPages()
        try withPower {
            $0.replaceKeys(newKeys)
            $0.passcodeSet = newPasscode != nil
        }
        if delaySpent { try endSecurityDelay(.passcode) }
    }

    /// Checks a passcode for `devicePasscode` access control, inside the caller's transaction:
    /// counted as every other check, and kept in memory until `saveAttempts` writes it once the
    /// transaction is over (a read cannot write, and a failed update rolls back).
    func isCorrectPasscode(_ passcode: String, _ db: Database) -> Bool {
        guard let settings = try? Keybag.Settings.load(db), settings.passcodeSet else { return false }
        let now = attemptClock.now()
        return unsavedAttempts.withLock { unsaved in
            var attempts = unsaved ?? settings.attempts
            defer { if attempts != (unsaved ?? settings.attempts) { unsaved = attempts } }
            guard attempts.retryAfter(at: now) == nil, let key = try? keybag.passcodeKey(passcode, settings: settings) else { return false }
            let hash = keybag.attemptHash(key)
            if hash != attempts.lastWrong, (try? keybag.unwrap(db, passcodeKey: key)) != nil {
                attempts = PasscodeAttempts()
                return true
            }
            _ = attempts.recordWrong(hash, at: now)
            return false
        }
    }

    /// Writes what `isCorrectPasscode` counted: the callers of access control call it once
    /// their transaction is over.
    func saveAttempts() throws {
        guard let attempts = unsavedAttempts.withLock({ $0 }) else { return }
        try database.write { db in try Keybag.save(attempts, db) }
        unsavedAttempts.withLock { if $0 == attempts { $0 = nil } }
    }

    // MARK: Biometry

    /// Enrolls a face or finger. Needs a passcode, as on iOS.
    public func enrollBiometry() throws {
        try setBiometry { settings in
            guard settings.passcodeSet || info.profile.reportsPasscodeSet else {
                throw DeviceError(.invalidArgument, "set a passcode before enrolling biometry.")
            }
            guard settings.biometryEnrollment == nil else {
                throw DeviceError(
                    .invalidArgument,
                    "biometry is already enrolled; change the enrollment instead to simulate a new face or finger.")
            }
            return entropy.bytes(16)
        }
    }

    /// Adds a new face or finger: items bound with `biometryCurrentSet` stop opening.
    public func changeBiometryEnrollment() throws {
        try setBiometry { settings in
            guard settings.biometryEnrollment != nil else { throw DeviceError(.invalidArgument, "no biometry is enrolled; enroll first.") }
            return entropy.bytes(16)
        }
    }

    public func removeBiometry() throws {
        try setBiometry { settings in
            guard settings.biometryEnrollment != nil else { throw DeviceError(.invalidArgument, "no biometry is enrolled.") }
            return nil
        }
    }

    /// Enrolling, changing and removing biometry happen in Settings, on an unlocked device.
    private func setBiometry(_ next: (Keybag.Settings) throws -> [UInt8]?) throws {
        guard try withPower({ $0.state }) == .unlocked else {
            throw DeviceError(.protectedDataUnavailable, "biometry is changed on an unlocked device, as in Settings on iOS; unlock it first.")
        }
        let delaySpent = try passSecurityDelay(.biometry)
        try database.write { db in
            let enrollment = try next(try Keybag.Settings.load(db))
            try Keybag.saveBiometryEnrollment(enrollment, db)
        }
        if delaySpent { try endSecurityDelay(.biometry) }
    }

    /// The current enrollment, which `biometryCurrentSet` items are bound to.
    func biometryEnrollment(_ db: Database) throws -> [UInt8]? {
        try Keybag.Settings.load(db).biometryEnrollment
    }
}

extension JSONEncoder {
    static var keyferry: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}

extension JSONDecoder {
    static var keyferry: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

enum UUIDBytes {
    /// A version-4 UUID from 16 random bytes (drawn from the injected entropy, so tests repeat).
    static func uuid(_ bytes: [UInt8]) -> UUID {
        var b = bytes
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}
