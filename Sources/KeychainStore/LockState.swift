import Foundation
import KeychainModel

/// The in-memory half of a powered-on device: which class keys are loaded, and the lock
/// state with its grace period. A value; `Device` keeps it behind a mutex.
struct LockStateMachine {
    private(set) var state: LockState
    private(set) var lockedAt: Date?
    private(set) var keys: [ProtectionClass: ClassKeys]
    /// Mirrors the keybag, so the hot path never reads the database for it.
    var passcodeSet: Bool
    let gracePeriod: TimeInterval

    /// Power-on: the UID-only keys are available. With no passcode that is every class, and the
    /// device is effectively unlocked; with one it waits before first unlock.
    init(bootKeys: [ProtectionClass: ClassKeys], passcodeSet: Bool, gracePeriod: TimeInterval) {
        keys = bootKeys
        state = passcodeSet ? .beforeFirstUnlock : .unlocked
        self.passcodeSet = passcodeSet
        self.gracePeriod = gracePeriod
    }

    mutating func unlocked(with allKeys: [ProtectionClass: ClassKeys]) {
        keys = allKeys
        state = .unlocked
        lockedAt = nil
    }

    /// Locks the screen. Class A keys go at once with `immediately`, or when `settle` finds the
    /// grace period over. Locking a device already locked within its grace period keeps the
    /// first lock's time, and `immediately` ends the grace there and then. Without a passcode
    /// nothing protects the keys, so none are dropped.
    mutating func lock(at now: Date, immediately: Bool) {
        switch state {
        case .unlocked:
            state = .locked
            lockedAt = now
        case .locked: break
        case .beforeFirstUnlock: return
        }
        guard passcodeSet else { return }
        if immediately || gracePeriod <= 0 { discardClassA() }
    }

    /// Applies the passage of time: drops class A keys once the grace period has ended.
    mutating func settle(at now: Date) {
        guard state == .locked, passcodeSet, let lockedAt, now >= lockedAt.addingTimeInterval(gracePeriod) else { return }
        discardClassA()
    }

    mutating func replaceKeys(_ newKeys: [ProtectionClass: ClassKeys]) { keys = newKeys }

    private mutating func discardClassA() {
        for protection in ProtectionClass.allCases where protection.availability == .whenUnlocked {
            keys[protection] = nil
        }
    }

    /// Seconds of grace left, while locked and class A keys are still in memory.
    func graceRemaining(at now: Date) -> TimeInterval? {
        guard state == .locked, let lockedAt, keys[.whenUnlocked] != nil else { return nil }
        return max(0, lockedAt.addingTimeInterval(gracePeriod).timeIntervalSince(now))
    }

    /// `isProtectedDataAvailable`: class A files and items can be read.
    var isProtectedDataAvailable: Bool { keys[.whenUnlocked] != nil }
}
