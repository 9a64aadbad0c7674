public import Foundation

/// Which items a query sees by their synchronizable flag. Apple's default is `.no`: a query
/// without `kSecAttrSynchronizable` never sees synced items.
public enum SynchronizableMatch: Hashable, Sendable, Codable {
    case no, yes, any

    public var values: [Bool] {
        switch self {
        case .no: [false]
        case .yes: [true]
        case .any: [false, true]
        }
    }
}

/// `kSecMatchLimit`: copy defaults to one match, update to every match; a delete always
/// touches every match.
public enum MatchLimit: Hashable, Sendable, Codable {
    case one
    case all
    case count(Int)

    public var maximum: Int? {
        switch self {
        case .one: 1
        case .all: nil
        case .count(let n): n
        }
    }
}

/// The `kSecReturn*` keys of a call.
public struct ReturnOptions: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let data = ReturnOptions(rawValue: 1 << 0)
    public static let attributes = ReturnOptions(rawValue: 1 << 1)
    public static let persistentRef = ReturnOptions(rawValue: 1 << 2)
    public static let ref = ReturnOptions(rawValue: 1 << 3)
}

/// An opaque, stable handle to one item (`kSecReturnPersistentRef`). It survives updates,
/// including primary-key changes, because it names the item's UUID.
public struct PersistentReference: Hashable, Sendable, Codable {
    public let itemClass: ItemClass
    public let uuid: UUID

    public init(itemClass: ItemClass, uuid: UUID) {
        self.itemClass = itemClass
        self.uuid = uuid
    }

    private static let magic = Array("kfpr".utf8)
    private static let version: UInt8 = 1

    /// `kfpr` · version 1 · four-byte class code · 16-byte UUID.
    public var data: Data {
        var out = Self.magic
        out.append(Self.version)
        out.append(contentsOf: itemClass.rawValue.utf8.prefix(4))
        while out.count < 9 { out.append(0x20) }
        out.append(contentsOf: uuid.bytes)
        return Data(out)
    }

    public init(from decoder: any Decoder) throws {
        try self.init(data: try decoder.singleValueContainer().decode(Data.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data)
    }

    public init(data: Data) throws(KeychainError) {
        let bytes = [UInt8](data)
        guard bytes.count == 25, Array(bytes[0..<4]) == Self.magic, bytes[4] == Self.version,
            let code = String(bytes: bytes[5..<9], encoding: .utf8),
            let itemClass = ItemClass(rawValue: code.trimmingCharacters(in: .whitespaces))
        else {
            throw KeychainError(.param, "kSecValuePersistentRef is not a persistent reference Keyferry made.")
        }
        let u = Array(bytes[9..<25])
        self.init(
            itemClass: itemClass, uuid: UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15])))
    }
}

/// The search half of `SecItemCopyMatching`, `SecItemUpdate` and `SecItemDelete`.
public struct ItemQuery: Hashable, Sendable, Codable {
    public var itemClass: ItemClass
    /// Class attributes that must be equal.
    public var attributes: Attributes
    public var accessGroup: String?
    /// `kSecAttrAccessible` in a search: legal, and the cause of the "phantom mismatch".
    public var protection: ProtectionClass?
    public var synchronizable: SynchronizableMatch
    public var persistentReference: PersistentReference?
    /// nil means the operation's default: one for copy, all for update and delete.
    public var matchLimit: MatchLimit?
    public var returning: ReturnOptions
    public var authentication: AuthenticationContext
    /// `kSecUseDataProtectionKeychain`, nil when absent: which of a Mac's keychains the call
    /// reaches (`MacKeychain`). Every other profile ignores it, as Apple's other platforms do.
    public var useDataProtectionKeychain: Bool?

    public init(
        _ itemClass: ItemClass, attributes: Attributes = [:], accessGroup: String? = nil,
        protection: ProtectionClass? = nil, synchronizable: SynchronizableMatch = .no,
        persistentReference: PersistentReference? = nil, matchLimit: MatchLimit? = nil,
        returning: ReturnOptions = [], authentication: AuthenticationContext = AuthenticationContext(),
        useDataProtectionKeychain: Bool? = nil
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.protection = protection
        self.synchronizable = synchronizable
        self.persistentReference = persistentReference
        self.matchLimit = matchLimit
        self.returning = returning
        self.authentication = authentication
        self.useDataProtectionKeychain = useDataProtectionKeychain
    }
}

/// The attributes of `SecItemAdd`.
public struct NewItem: Hashable, Sendable, Codable {
    /// The largest secret a Keyferry item holds: 2 MiB. What sync and the node's control API
    /// carry in one piece; a larger one is `errSecDataTooLarge`.
    public static let maximumDataBytes = 2 << 20

    /// `errSecDataTooLarge` naming the size given and the limit, or nothing.
    public static func checkSize(of data: Data) throws(KeychainError) {
        guard data.count > maximumDataBytes else { return }
        throw KeychainError(.dataTooLarge, "the secret is \(byteSize(data.count)); a Keyferry item holds up to \(byteSize(maximumDataBytes)).")
    }

    public var itemClass: ItemClass
    public var attributes: Attributes
    /// nil: the app's first entitled access group.
    public var accessGroup: String?
    /// nil: the class default (or the access control's protection).
    public var protection: ProtectionClass?
    public var accessControl: AccessControl?
    public var synchronizable: Bool
    public var data: Data
    public var returning: ReturnOptions
    /// `kSecUseDataProtectionKeychain`, nil when absent (see `ItemQuery`).
    public var useDataProtectionKeychain: Bool?

    public init(
        _ itemClass: ItemClass, attributes: Attributes = [:], data: Data = Data(), accessGroup: String? = nil,
        protection: ProtectionClass? = nil, accessControl: AccessControl? = nil, synchronizable: Bool = false,
        returning: ReturnOptions = [], useDataProtectionKeychain: Bool? = nil
    ) {
        self.itemClass = itemClass
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.protection = protection
        self.accessControl = accessControl
        self.synchronizable = synchronizable
        self.data = data
        self.returning = returning
        self.useDataProtectionKeychain = useDataProtectionKeychain
    }
}

/// The second dictionary of `SecItemUpdate`: what to change on every match.
public struct ItemChanges: Hashable, Sendable, Codable {
    public var attributes: Attributes
    public var accessGroup: String?
    public var protection: ProtectionClass?
    public var synchronizable: Bool?
    public var data: Data?

    public init(
        attributes: Attributes = [:], accessGroup: String? = nil, protection: ProtectionClass? = nil,
        synchronizable: Bool? = nil, data: Data? = nil
    ) {
        self.attributes = attributes
        self.accessGroup = accessGroup
        self.protection = protection
        self.synchronizable = synchronizable
        self.data = data
    }

    public var isEmpty: Bool {
        attributes.isEmpty && accessGroup == nil && protection == nil && synchronizable == nil && data == nil
    }
}

/// One item as a call returns it.
public struct ItemRecord: Hashable, Sendable, Codable {
    public var itemClass: ItemClass
    public var uuid: UUID
    public var accessGroup: String
    public var protection: ProtectionClass
    public var synchronizable: Bool
    public var accessControl: AccessControl?
    public var creationDate: Date
    public var modificationDate: Date
    public var attributes: Attributes
    /// Present only when the call asked for data.
    public var data: Data?

    public init(
        itemClass: ItemClass, uuid: UUID, accessGroup: String, protection: ProtectionClass, synchronizable: Bool,
        accessControl: AccessControl?, creationDate: Date, modificationDate: Date, attributes: Attributes, data: Data?
    ) {
        self.itemClass = itemClass
        self.uuid = uuid
        self.accessGroup = accessGroup
        self.protection = protection
        self.synchronizable = synchronizable
        self.accessControl = accessControl
        self.creationDate = creationDate
        self.modificationDate = modificationDate
        self.attributes = attributes
        self.data = data
    }

    public var persistentReference: PersistentReference { PersistentReference(itemClass: itemClass, uuid: uuid) }

    /// Why no backup or transfer carries this item, whatever its protection class; nil when
    /// its class decides.
    public var neverExported: NeverExported? {
        NeverExported(itemClass: itemClass, tokenID: attributes[.tokenID], accessControl: accessControl)
    }

    /// The primary key's values, in the class's order: what makes two items the same item.
    public var primaryKey: PrimaryKey {
        PrimaryKey(itemClass: itemClass, accessGroup: accessGroup, synchronizable: synchronizable, attributes: attributes)
    }
}

/// The identity of an item: class, access group, synchronizable and the class's key attributes
/// (missing ones as "" or 0). Accessibility, label and access control are not part of it.
public struct PrimaryKey: Hashable, Sendable {
    public let itemClass: ItemClass
    public let accessGroup: String
    public let synchronizable: Bool
    public let values: [AttributeValue]

    public init(itemClass: ItemClass, accessGroup: String, synchronizable: Bool, attributes: Attributes) {
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.synchronizable = synchronizable
        self.values = itemClass.primaryKey.map { attributes[$0] ?? .empty(of: $0.kind!) }
    }

    /// Length-prefixed canonical bytes, the message of the primary-key keyed hash.
    public var canonicalBytes: [UInt8] {
        var out = ByteWriter()
        out.primaryKey(self)
        return out.bytes
    }
}

/// `512 bytes`, `1.5 MiB`: a size as people read it.
public func byteSize(_ bytes: Int) -> String {
    if bytes < 1024 { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
    let units = ["KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes) / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    let rounded = (value * 10).rounded() / 10
    return (rounded == rounded.rounded() ? "\(Int(rounded))" : "\(rounded)") + " " + units[unit]
}
