/// A keychain result code with Apple's name, so callers can match on the constants they know.
public struct KeychainStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let success = KeychainStatus(rawValue: 0)
    public static let unimplemented = KeychainStatus(rawValue: -4)
    public static let param = KeychainStatus(rawValue: -50)
    public static let userCanceled = KeychainStatus(rawValue: -128)
    public static let notAvailable = KeychainStatus(rawValue: -25291)
    public static let readOnly = KeychainStatus(rawValue: -25292)
    public static let authFailed = KeychainStatus(rawValue: -25293)
    public static let duplicateItem = KeychainStatus(rawValue: -25299)
    public static let itemNotFound = KeychainStatus(rawValue: -25300)
    public static let dataTooLarge = KeychainStatus(rawValue: -25302)
    public static let noSuchAttr = KeychainStatus(rawValue: -25303)
    public static let noSuchClass = KeychainStatus(rawValue: -25306)
    public static let interactionNotAllowed = KeychainStatus(rawValue: -25308)
    public static let readOnlyAttr = KeychainStatus(rawValue: -25309)
    public static let interactionRequired = KeychainStatus(rawValue: -25315)
    public static let decode = KeychainStatus(rawValue: -26275)
    public static let missingEntitlement = KeychainStatus(rawValue: -34018)
    public static let internalError = KeychainStatus(rawValue: -67671)

    /// Apple's names and meanings: those Keyferry returns, and the others keychain code tests for.
    private static let names: [Int32: (name: String, meaning: String)] = [
        0: ("errSecSuccess", "No error."),
        -4: ("errSecUnimplemented", "Function or operation not implemented."),
        -34: ("errSecDiskFull", "The disk is full."),
        -36: ("errSecIO", "I/O error."),
        -49: ("errSecOpWr", "File already open with write permission."),
        -108: ("errSecAllocate", "Failed to allocate memory."),
        -909: ("errSecBadReq", "Bad parameter or invalid state for operation."),
        -25294: ("errSecNoSuchKeychain", "The specified keychain could not be found."),
        -25295: ("errSecInvalidKeychain", "The specified keychain is not a valid keychain file."),
        -25301: ("errSecBufferTooSmall", "There is not enough memory available to use the specified item."),
        -25304: ("errSecInvalidItemRef", "The specified item is no longer valid. It may have been deleted from the keychain."),
        -67808: ("errSecVerifyFailed", "A cryptographic verification failure has occurred."),
        -50: ("errSecParam", "One or more parameters passed to a function were not valid."),
        -128: ("errSecUserCanceled", "User canceled the operation."),
        -25291: ("errSecNotAvailable", "No keychain is available."),
        -25292: ("errSecReadOnly", "This keychain cannot be modified."),
        -25293: ("errSecAuthFailed", "The user name or passphrase you entered is not correct."),
        -25299: ("errSecDuplicateItem", "The specified item already exists in the keychain."),
        -25300: ("errSecItemNotFound", "The specified item could not be found in the keychain."),
        -25302: ("errSecDataTooLarge", "This item contains information which is too large or in a format that cannot be displayed."),
        -25303: ("errSecNoSuchAttr", "The specified attribute does not exist."),
        -25306: ("errSecNoSuchClass", "The specified item class does not exist."),
        -25308: ("errSecInteractionNotAllowed", "User interaction is not allowed."),
        -25309: ("errSecReadOnlyAttr", "The specified attribute could not be modified."),
        -25315: ("errSecInteractionRequired", "User interaction is required."),
        -26275: ("errSecDecode", "Unable to decode the provided data."),
        -34018: ("errSecMissingEntitlement", "A required entitlement isn't present."),
        -67671: ("errSecInternalError", "An internal error occurred."),
    ]

    /// The status Apple names `name` (`errSecItemNotFound`), among those Keyferry returns.
    public init?(name: String) {
        guard let code = Self.names.first(where: { $0.value.name == name })?.key else { return nil }
        self.init(rawValue: code)
    }

    /// Every status name Keyferry knows, in code order.
    public static var allNames: [String] { names.sorted { $0.key > $1.key }.map(\.value.name) }

    /// Apple's constant name, e.g. `errSecItemNotFound`.
    public var name: String { Self.names[rawValue]?.name ?? "OSStatus" }
    /// Apple's one-line meaning of the code.
    public var meaning: String { Self.names[rawValue]?.meaning ?? "Unknown status." }
    public var description: String { "\(name) (\(rawValue))" }
}

/// A failed keychain call: Apple's status plus a sentence saying what happened and what to do.
public struct KeychainError: Error, Hashable, Sendable, CustomStringConvertible {
    public let status: KeychainStatus
    public let message: String

    public init(_ status: KeychainStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// `errSecName (-NNNNN): sentence`, the form the command line prints.
    public var description: String { "\(status.name) (\(status.rawValue)): \(message)" }
}
