public import Foundation

/// An item the store holds but cannot open: its row fails authentication, damaged or edited.
/// Reads of many items (a list, a search for all, a backup, sync) skip it and name it here, as
/// Apple's keychain server returns what it can; a read of it alone still fails (errSecDecode).
public struct DamagedItem: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public var uuid: UUID
    public var itemClass: ItemClass
    public var protection: ProtectionClass
    public var synchronizable: Bool
    /// What failed, in a sentence.
    public var problem: String

    public init(uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool, problem: String) {
        self.uuid = uuid
        self.itemClass = itemClass
        self.protection = protection
        self.synchronizable = synchronizable
        self.problem = problem
    }

    /// `item UUID (genericPassword, afterFirstUnlock) cannot be opened: …`
    public var description: String { "item \(uuid.uuidString) (\(itemClass.name), \(protection.name)) cannot be opened: \(problem)" }

    /// A warning naming the damaged items a backup or transfer left out; nil when none was.
    public static func leftOut(_ items: [DamagedItem]) -> String? {
        guard let first = items.first else { return nil }
        let named = items.prefix(5).map { "\($0.uuid.uuidString) (\($0.itemClass.name), \($0.protection.name))" }.joined(separator: ", ")
        return "\(items.count) damaged keychain item\(items.count == 1 ? "" : "s") left out, whose stored row\(items.count == 1 ? "" : "s") "
            + "fail\(items.count == 1 ? "s" : "") authentication: \(named)\(items.count > 5 ? ", …" : "") (\(first.problem))"
    }
}
