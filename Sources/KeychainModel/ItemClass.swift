/// The five `kSecClass` values. Raw values are Apple's.
public enum ItemClass: String, AppleNamed, Hashable, Sendable, Codable {
    public static let secConstantPrefix = "kSecClass"

    case genericPassword = "genp"
    case internetPassword = "inet"
    case certificate = "cert"
    case key = "keys"
    /// A certificate paired with its private key; stored as those two items, never as its own row.
    case identity = "idnt"

    /// The name without Apple's prefix: `genericPassword`.
    public var name: String {
        switch self {
        case .genericPassword: "genericPassword"
        case .internetPassword: "internetPassword"
        case .certificate: "certificate"
        case .key: "key"
        case .identity: "identity"
        }
    }

    /// The secret-free default protection for new items: certificates are public, so Apple
    /// gives them class D; everything else defaults to `whenUnlocked`.
    public var defaultProtection: ProtectionClass { self == .certificate ? .always : .whenUnlocked }
}
