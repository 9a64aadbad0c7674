/// The five `kSecClass` values. Raw values are Apple's.
public enum ItemClass: String, CaseIterable, Hashable, Sendable, Codable {
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

    /// Apple's constant name: `kSecClassGenericPassword`.
    public var secConstantName: String { "kSecClass" + name.prefix(1).uppercased() + name.dropFirst() }

    /// Accepts the short code (`genp`), the name (`genericPassword`) or Apple's constant name.
    public init?(name: String) {
        if let match = Self.allCases.first(where: { $0.rawValue == name || $0.name == name || $0.secConstantName == name }) {
            self = match
        } else {
            return nil
        }
    }

    /// Classes that have rows of their own.
    public static let stored: [ItemClass] = [.genericPassword, .internetPassword, .certificate, .key]

    /// The secret-free default protection for new items: certificates are public, so Apple
    /// gives them class D; everything else defaults to `whenUnlocked`.
    public var defaultProtection: ProtectionClass { self == .certificate ? .always : .whenUnlocked }
}
