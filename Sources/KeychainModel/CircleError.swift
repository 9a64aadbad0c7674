/// Why a circle operation failed: a code to branch on (retry a lost race, give up on a removal)
/// and a sentence that names the fix.
public typealias CircleError = CodedFailure<CircleErrorDomain>

public enum CircleErrorDomain: FailureDomain {
    public static let name = "circle"

    public static func kind(of code: CircleError.Code) -> ProblemKind {
        switch code {
        case .concurrentChange, .relayUnreachable, .keysUnavailable: .unavailable
        case .unknownCircle, .noSuchMember, .notInCircle, .noSuchRequest: .notFound
        case .alreadyInCircle, .ambiguousMember, .cannotRemoveSelf, .invalidName, .notVouched, .noICloudKeychain, .invalidRequest, .ambiguousRequest,
            .staleVoucher, .forged:
            .invalidInput
        default: .failure
        }
    }

    /// Keys that are not there yet may never come: only a lost race and an unreachable relay
    /// are worth the same call again.
    public static func isRetryable(_ code: CircleError.Code) -> Bool { code == .concurrentChange || code == .relayUnreachable }
}

extension CodedFailure.Code where Domain == CircleErrorDomain {
    /// A membership history or entry that does not verify: forged, reordered, truncated.
    public static var invalidHistory: Self { Self(rawValue: "invalidHistory") }
    /// The relay holds no such circle.
    public static var unknownCircle: Self { Self(rawValue: "unknownCircle") }
    public static var alreadyInCircle: Self { Self(rawValue: "alreadyInCircle") }
    public static var notInCircle: Self { Self(rawValue: "notInCircle") }
    /// A voucher made for another device or circle, or one no member signed.
    public static var notVouched: Self { Self(rawValue: "notVouched") }
    /// This device was removed from its circle; it no longer syncs.
    public static var removed: Self { Self(rawValue: "removed") }
    /// Another member changed the circle first; nothing was changed, and running the
    /// same command again may succeed.
    public static var concurrentChange: Self { Self(rawValue: "concurrentChange") }
    public static var noSuchMember: Self { Self(rawValue: "noSuchMember") }
    public static var ambiguousMember: Self { Self(rawValue: "ambiguousMember") }
    /// A member asked to remove itself (`circle leave` does that).
    public static var cannotRemoveSelf: Self { Self(rawValue: "cannotRemoveSelf") }
    public static var invalidName: Self { Self(rawValue: "invalidName") }
    /// A key generation this member cannot open, or that the relay does not hold.
    public static var keysUnavailable: Self { Self(rawValue: "keysUnavailable") }
    /// The relay did not answer, so the other members cannot be told; nothing was changed.
    public static var relayUnreachable: Self { Self(rawValue: "relayUnreachable") }
    /// What the member remembers of its circle (`sync.json`) cannot be read.
    public static var unreadableState: Self { Self(rawValue: "unreadableState") }
    /// The device has no iCloud Keychain (the iOS Simulator).
    public static var noICloudKeychain: Self { Self(rawValue: "noICloudKeychain") }
    /// A join request that cannot be made: a lifetime out of range, a circle the relay
    /// does not hold.
    public static var invalidRequest: Self { Self(rawValue: "invalidRequest") }
    /// No pending join request shows that code.
    public static var noSuchRequest: Self { Self(rawValue: "noSuchRequest") }
    /// Two pending requests from different devices show that code: neither is approved.
    public static var ambiguousRequest: Self { Self(rawValue: "ambiguousRequest") }
    /// A member declined this device's join request.
    public static var declined: Self { Self(rawValue: "declined") }
    /// The join request expired before a member answered it.
    public static var requestExpired: Self { Self(rawValue: "requestExpired") }
    /// A voucher the circle has moved past (its entry's place is taken, or its keys are an
    /// earlier generation's): used once already, or made before another change.
    public static var staleVoucher: Self { Self(rawValue: "staleVoucher") }
    /// A voucher, approval or decline whose signature does not hold, or that no member made.
    public static var forged: Self { Self(rawValue: "forged") }
}
