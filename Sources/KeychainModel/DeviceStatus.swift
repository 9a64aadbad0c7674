public import Foundation

/// Where the device is in its power and lock cycle.
public enum LockState: String, Sendable, Codable {
    /// Booted, not yet unlocked: only class D keys are in memory.
    case beforeFirstUnlock = "bfu"
    case unlocked
    /// Screen locked: class A keys stay only until the grace period ends.
    case locked
}

/// What a device is right now: power, lock state, passcode and biometry, failed attempts, items.
public struct DeviceStatus: Sendable, Codable, Equatable {
    public var name: String
    public var id: UUID
    public var poweredOn: Bool
    /// nil while powered off.
    public var lockState: LockState?
    public var protectedDataAvailable: Bool
    public var graceRemaining: TimeInterval?
    public var passcodeSet: Bool
    public var biometryEnrolled: Bool
    /// `LAContext.evaluatedPolicyDomainState`: changes whenever a face or finger is enrolled,
    /// re-enrolled or removed (a digest of the enrollment, never the enrollment itself).
    public var biometryDomainState: Data?
    public var failedPasscodeAttempts: Int
    /// Seconds until a passcode may be tried again, after five or more failed attempts.
    public var passcodeRetryAfter: TimeInterval?
    /// Live items (tombstones excluded), counted without opening any.
    public var itemCount: Int
    /// What the device behaves as.
    public var profile: DeviceProfile
    /// Stolen Device Protection, where the device's iOS has it.
    public var security: SecuritySettings?

    public init(
        name: String, id: UUID, poweredOn: Bool, lockState: LockState?, protectedDataAvailable: Bool, graceRemaining: TimeInterval?,
        passcodeSet: Bool, biometryEnrolled: Bool, biometryDomainState: Data?, failedPasscodeAttempts: Int, passcodeRetryAfter: TimeInterval?,
        itemCount: Int, profile: DeviceProfile = .iphone, security: SecuritySettings? = nil
    ) {
        self.profile = profile
        self.security = security
        self.name = name
        self.id = id
        self.poweredOn = poweredOn
        self.lockState = lockState
        self.protectedDataAvailable = protectedDataAvailable
        self.graceRemaining = graceRemaining
        self.passcodeSet = passcodeSet
        self.biometryEnrolled = biometryEnrolled
        self.biometryDomainState = biometryDomainState
        self.failedPasscodeAttempts = failedPasscodeAttempts
        self.passcodeRetryAfter = passcodeRetryAfter
        self.itemCount = itemCount
    }
}

/// iOS file protection classes, for sandbox files.
public enum FileProtection: String, Codable, Sendable, CaseIterable {
    /// Class A: readable only while unlocked.
    case complete
    /// Class B: a new file can be created while locked (its key is wrapped to the class's
    /// public key); an existing one is read or rewritten only while unlocked.
    case completeUnlessOpen
    /// Class C, the default: readable after first unlock.
    case completeUntilFirstUserAuthentication
    /// Class D: always readable.
    case none

    public var keyClass: ProtectionClass {
        switch self {
        case .complete, .completeUnlessOpen: .whenUnlocked
        case .completeUntilFirstUserAuthentication: .afterFirstUnlock
        case .none: .always
        }
    }
}
