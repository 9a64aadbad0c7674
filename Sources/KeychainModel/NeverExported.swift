/// Why Apple's backup and device-to-device transfer leave an item out whatever its protection
/// class: Apple's export skips "akpu items ... The same applies to SEP-based keys" (items with
/// a token, `SecItemDb.c`), and items whose access control asks for the user. (Class
/// WhenPasscodeSetThisDeviceOnly is left out by its class.)
public enum NeverExported: String, Sendable {
    /// A key made in the Secure Enclave (`kSecAttrTokenIDSecureEnclave`): it never leaves the
    /// device it was made on.
    case secureEnclave
    /// Access control that asks for the user (passcode, biometry, user presence).
    case accessControl

    /// The token ID of a key made in the Secure Enclave (`kSecAttrTokenIDSecureEnclave`).
    public static let secureEnclaveToken = "com.apple.setoken"

    public init?(itemClass: ItemClass, tokenID: AttributeValue?, accessControl: AccessControl?) {
        if itemClass == .key, tokenID != nil {
            self = .secureEnclave
        } else if accessControl?.asksForUser == true {
            self = .accessControl
        } else {
            return nil
        }
    }

    /// Why, in a sentence: for restore reports and the survival matrix.
    public var sentence: String {
        switch self {
        case .secureEnclave: "a Secure Enclave key never leaves the device it was made on: it is in no backup or transfer"
        case .accessControl: "items whose access control asks for the user are in no backup or transfer"
        }
    }
}
