/// A set of Apple constants known by three spellings: the short code Apple stores (`genp`,
/// `ak`), the name without prefix the command line uses (`genericPassword`, `whenUnlocked`)
/// and Apple's constant name (`kSecClassGenericPassword`, `kSecAttrAccessibleWhenUnlocked`).
public protocol AppleNamed: CaseIterable, RawRepresentable where RawValue == String {
    static var secConstantPrefix: String { get }
    /// The name without Apple's prefix.
    var name: String { get }
}

extension AppleNamed {
    /// Apple's constant name, e.g. `kSecClassGenericPassword`.
    public var secConstantName: String { Self.secConstantPrefix + name.prefix(1).uppercased() + name.dropFirst() }

    /// Accepts any of the three spellings.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.rawValue == name || $0.name == name || $0.secConstantName == name }) else {
            return nil
        }
        self = match
    }
}
