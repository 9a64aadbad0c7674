public import Foundation

/// Stolen Device Protection (iOS 17.3 and later, on by default from iOS 26.4): away from
/// familiar locations, or always when the user chooses, changing the passcode, adding or
/// removing Face ID, and turning the protection off wait for a one-hour Security Delay, then a
/// second Face ID. Apple's "About Stolen Device Protection for iPhone" (support.apple.com/120340);
/// Protocol/profiles.md.
public enum StolenDeviceProtection: String, Codable, Sendable, CaseIterable {
    case off
    /// The delay applies away from familiar locations (home, work): Apple's default choice.
    case away
    /// The delay applies everywhere ("Require Security Delay: Always").
    case always

    /// The one-hour Security Delay.
    public static let securityDelay: TimeInterval = 3600
}

/// The changes a Security Delay holds.
public enum DelayedChange: String, Codable, Sendable, CaseIterable {
    case passcode, biometry, turningProtectionOff

    public var summary: String {
        switch self {
        case .passcode: "changing or removing the passcode"
        case .biometry: "adding, changing or removing Face ID"
        case .turningProtectionOff: "turning Stolen Device Protection off"
        }
    }
}

/// A device's Stolen Device Protection: the setting, where the device is, and the delays that
/// have started, by change, each with when it started.
public struct SecuritySettings: Codable, Sendable, Equatable {
    public var stolenDeviceProtection: StolenDeviceProtection
    /// Away from the device's familiar locations.
    public var away: Bool
    public var delaysStarted: [DelayedChange: Date]

    public init(stolenDeviceProtection: StolenDeviceProtection, away: Bool = false, delaysStarted: [DelayedChange: Date] = [:]) {
        self.stolenDeviceProtection = stolenDeviceProtection
        self.away = away
        self.delaysStarted = delaysStarted
    }

    /// Whether a change waits for the Security Delay now: the protection is on (which needs a
    /// passcode and Face ID), and the device is away or the user asked for it always.
    public func delays(passcodeSet: Bool, biometryEnrolled: Bool) -> Bool {
        guard passcodeSet, biometryEnrolled else { return false }
        switch stolenDeviceProtection {
        case .off: return false
        case .away: return away
        case .always: return true
        }
    }
}
