/// The seven data-protection classes of `kSecAttrAccessible`. Raw values are Apple's (`pdmn`).
public enum ProtectionClass: String, AppleNamed, Hashable, Sendable, Codable {
    public static let secConstantPrefix = "kSecAttrAccessible"

    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case always = "dk"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"
    case alwaysThisDeviceOnly = "dku"
    case whenPasscodeSetThisDeviceOnly = "akpu"

    /// When the class key is in memory.
    public enum Availability: Sendable {
        /// Only while unlocked (and during the grace period after locking): class A.
        case whenUnlocked
        /// From the first unlock after boot until power-off: class C.
        case afterFirstUnlock
        /// Whenever the device is on: class D.
        case always
    }

    public var availability: Availability {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: .whenUnlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: .always
        }
    }

    /// Bound to this device's hardware UID: never synced, never restored onto another device.
    public var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: false
        default: true
        }
    }

    /// Whether the class key is wrapped with the passcode (when one is set). Class D is
    /// protected by the hardware UID alone.
    public var isPasscodeProtected: Bool { availability != .always }

    /// The name without Apple's prefix, as the command line spells it: `whenUnlocked`.
    public var name: String {
        switch self {
        case .whenUnlocked: "whenUnlocked"
        case .afterFirstUnlock: "afterFirstUnlock"
        case .always: "always"
        case .whenUnlockedThisDeviceOnly: "whenUnlockedThisDeviceOnly"
        case .afterFirstUnlockThisDeviceOnly: "afterFirstUnlockThisDeviceOnly"
        case .alwaysThisDeviceOnly: "alwaysThisDeviceOnly"
        case .whenPasscodeSetThisDeviceOnly: "whenPasscodeSetThisDeviceOnly"
        }
    }
}
