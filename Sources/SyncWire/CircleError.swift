import KeychainModel

/// Why a circle operation failed: a code to branch on (retry a lost race, give up on a removal)
/// and a sentence that names the fix.
public struct CircleError: CodedError, Hashable {
    public static let domain = "circle"

    /// Open, like `DeviceError.Code`: a layer above may add codes of its own.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A membership history or entry that does not verify: forged, reordered, truncated.
        public static let invalidHistory = Code(rawValue: "invalidHistory")
        /// The relay holds no such circle.
        public static let unknownCircle = Code(rawValue: "unknownCircle")
        public static let alreadyInCircle = Code(rawValue: "alreadyInCircle")
        public static let notInCircle = Code(rawValue: "notInCircle")
        /// A voucher made for another device or circle, or one no member signed.
        public static let notVouched = Code(rawValue: "notVouched")
        /// This device was removed from its circle; it no longer syncs.
        public static let removed = Code(rawValue: "removed")
        /// Another member changed the circle first; nothing was changed, and running the
        /// same command again may succeed.
        public static let concurrentChange = Code(rawValue: "concurrentChange")
        public static let noSuchMember = Code(rawValue: "noSuchMember")
        public static let ambiguousMember = Code(rawValue: "ambiguousMember")
        /// A member asked to remove itself (`circle leave` does that).
        public static let cannotRemoveSelf = Code(rawValue: "cannotRemoveSelf")
        public static let invalidName = Code(rawValue: "invalidName")
        /// A key generation this member cannot open, or that the relay does not hold.
        public static let keysUnavailable = Code(rawValue: "keysUnavailable")
        /// The relay did not answer, so the other members cannot be told; nothing was changed.
        public static let relayUnreachable = Code(rawValue: "relayUnreachable")
        /// What the member remembers of its circle (`sync.json`) cannot be read.
        public static let unreadableState = Code(rawValue: "unreadableState")
        /// The device has no iCloud Keychain (the iOS Simulator).
        public static let noICloudKeychain = Code(rawValue: "noICloudKeychain")
        /// A join request that cannot be made: a lifetime out of range, a circle the relay
        /// does not hold.
        public static let invalidRequest = Code(rawValue: "invalidRequest")
        /// No pending join request shows that code.
        public static let noSuchRequest = Code(rawValue: "noSuchRequest")
        /// Two pending requests from different devices show that code: neither is approved.
        public static let ambiguousRequest = Code(rawValue: "ambiguousRequest")
        /// A member declined this device's join request.
        public static let declined = Code(rawValue: "declined")
        /// The join request expired before a member answered it.
        public static let requestExpired = Code(rawValue: "requestExpired")
        /// A voucher the circle has moved past (its entry's place is taken, or its keys are an
        /// earlier generation's): used once already, or made before another change.
        public static let staleVoucher = Code(rawValue: "staleVoucher")
        /// A voucher, approval or decline whose signature does not hold, or that no member made.
        public static let forged = Code(rawValue: "forged")
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var kind: ProblemKind {
        switch code {
        case .concurrentChange, .relayUnreachable, .keysUnavailable: .unavailable
        case .unknownCircle, .noSuchMember, .notInCircle, .noSuchRequest: .notFound
        case .alreadyInCircle, .ambiguousMember, .cannotRemoveSelf, .invalidName, .notVouched, .noICloudKeychain, .invalidRequest, .ambiguousRequest,
            .staleVoucher, .forged:
            .invalidInput
        default: .failure
        }
    }

    /// Whether the same call may succeed later, unchanged.
    public var isRetryable: Bool { code == .concurrentChange || code == .relayUnreachable }
}
