/// A keychain result code with Apple's name, so callers can match on the constants they know.
public struct KeychainStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
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
    public static let verifyFailed = KeychainStatus(rawValue: -67808)

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
        // The rest of Security's SecBase.h that code on Apple's phones can be handed or test for.
        -61: ("errSecWrPerm", "Write permissions error."),
        -2070: ("errSecInternalComponent", "An internal component failed."),
        -4960: ("errSecCoreFoundationUnknown", "An unknown Core Foundation error occurred."),
        -34020: ("errSecRestrictedAPI", "The client is restricted and is not permitted to perform this operation."),
        -25296: ("errSecDuplicateKeychain", "A keychain with the same name already exists."),
        -25297: ("errSecDuplicateCallback", "The specified callback function is already installed."),
        -25298: ("errSecInvalidCallback", "The specified callback function is not valid."),
        -25305: ("errSecInvalidSearchRef", "Unable to search the current keychain."),
        -25307: ("errSecNoDefaultKeychain", "A default keychain could not be found."),
        -25310: ("errSecWrongSecVersion", "This keychain was created by a different version of the system software."),
        -25311: ("errSecKeySizeNotAllowed", "This item specifies a key size which is too large or too small."),
        -25312: ("errSecNoStorageModule", "A required component (data storage module) could not be loaded."),
        -25313: ("errSecNoCertificateModule", "A required component (certificate module) could not be loaded."),
        -25314: ("errSecNoPolicyModule", "A required component (policy module) could not be loaded."),
        -25316: ("errSecDataNotAvailable", "The contents of this item cannot be retrieved."),
        -25317: ("errSecDataNotModifiable", "The contents of this item cannot be modified."),
        -25318: ("errSecCreateChainFailed", "One or more certificates required to validate this certificate cannot be found."),
        -25319: ("errSecInvalidPrefsDomain", "The specified preferences domain is not valid."),
        -25320: ("errSecInDarkWake", "In dark wake, no UI possible."),
        -25240: ("errSecACLNotSimple", "The specified access control list is not in standard (simple) form."),
        -25241: ("errSecPolicyNotFound", "The specified policy cannot be found."),
        -25242: ("errSecInvalidTrustSetting", "The specified trust setting is invalid."),
        -25243: ("errSecNoAccessForItem", "The specified item has no access control."),
        -25244: ("errSecInvalidOwnerEdit", "Invalid attempt to change the owner of this item."),
        -25245: ("errSecTrustNotAvailable", "No trust results are available."),
        -25256: ("errSecUnsupportedFormat", "Import/Export format unsupported."),
        -25257: ("errSecUnknownFormat", "Unknown format in import."),
        -25258: ("errSecKeyIsSensitive", "Key material must be wrapped for export."),
        -25259: ("errSecMultiplePrivKeys", "An attempt was made to import multiple private keys."),
        -25260: ("errSecPassphraseRequired", "Passphrase is required for import/export."),
        -25261: ("errSecInvalidPasswordRef", "The password reference was invalid."),
        -25262: ("errSecInvalidTrustSettings", "The Trust Settings Record was corrupted."),
        -25263: ("errSecNoTrustSettings", "No Trust Settings were found."),
        -25264: ("errSecPkcs12VerifyFailure", "MAC verification failed during PKCS12 import (wrong password?)."),
        -26267: ("errSecNotSigner", "A certificate was not signed by its proposed parent."),
        -67585: ("errSecServiceNotAvailable", "The required service is not available."),
        -67586: ("errSecInsufficientClientID", "The client ID is not correct."),
        -67587: ("errSecDeviceReset", "A device reset has occurred."),
        -67588: ("errSecDeviceFailed", "A device failure has occurred."),
        -67843: ("errSecNotTrusted", "The trust policy was not trusted."),
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
public struct KeychainError: CodedError, Hashable {
    public static let domain = "keychain"
    public let status: KeychainStatus
    public let message: String
    /// Which of the status's several causes, where a caller acts on it (the command line names
    /// the option that answers a prompt); nil for most.
    public let reason: Reason?

    /// Open: more may come.
    public struct Reason: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The item's access control needs the user, and no prompt may be shown.
        public static let userAuthenticationNeeded = Reason(rawValue: "userAuthenticationNeeded")
    }

    public var code: KeychainStatus { status }
    /// errSecAuthFailed is a wrong or missing passcode, password or biometry wherever it comes
    /// from; every other status is the keychain's answer.
    public var kind: ProblemKind { status == .authFailed ? .authentication : .keychain }

    public init(_ status: KeychainStatus, _ message: String, reason: Reason? = nil) {
        self.status = status
        self.message = message
        self.reason = reason
    }

    /// `errSecName (-NNNNN): sentence`, the form the command line prints.
    public var description: String { "\(status.name) (\(status.rawValue)): \(message)" }
}
