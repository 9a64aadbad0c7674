import Foundation

/// An item attribute, named by Apple's short key (`acct` for `kSecAttrAccount`).
public struct AttributeKey: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    init(_ raw: String) { self.rawValue = raw }

    public static func < (lhs: AttributeKey, rhs: AttributeKey) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { rawValue }

    /// What kind of value an attribute holds.
    public enum Kind: UInt8, Sendable {
        case string = 1, data = 2, number = 3, bool = 4, date = 5
    }

    // Password attributes
    public static let account = AttributeKey("acct")
    public static let service = AttributeKey("svce")
    public static let generic = AttributeKey("gena")
    public static let label = AttributeKey("labl")
    public static let description = AttributeKey("desc")
    public static let comment = AttributeKey("icmt")
    public static let creator = AttributeKey("crtr")
    public static let type = AttributeKey("type")
    public static let isInvisible = AttributeKey("invi")
    public static let isNegative = AttributeKey("nega")
    public static let securityDomain = AttributeKey("sdmn")
    public static let server = AttributeKey("srvr")
    public static let `protocol` = AttributeKey("ptcl")
    public static let authenticationType = AttributeKey("atyp")
    public static let port = AttributeKey("port")
    public static let path = AttributeKey("path")
    // Certificate attributes
    public static let certificateType = AttributeKey("ctyp")
    public static let certificateEncoding = AttributeKey("cenc")
    public static let subject = AttributeKey("subj")
    public static let issuer = AttributeKey("issr")
    public static let serialNumber = AttributeKey("slnr")
    public static let subjectKeyID = AttributeKey("skid")
    public static let publicKeyHash = AttributeKey("pkhh")
    // Key attributes
    public static let keyClass = AttributeKey("kcls")
    public static let applicationLabel = AttributeKey("klbl")
    public static let applicationTag = AttributeKey("atag")
    public static let keySizeInBits = AttributeKey("bsiz")
    public static let effectiveKeySize = AttributeKey("esiz")
    public static let startDate = AttributeKey("sdat")
    public static let endDate = AttributeKey("edat")
    public static let isPermanent = AttributeKey("perm")
    public static let isSensitive = AttributeKey("sens")
    public static let isExtractable = AttributeKey("extr")
    public static let canEncrypt = AttributeKey("encr")
    public static let canDecrypt = AttributeKey("decr")
    public static let canDerive = AttributeKey("drve")
    public static let canSign = AttributeKey("sign")
    public static let canVerify = AttributeKey("vrfy")
    public static let canWrap = AttributeKey("wrap")
    public static let canUnwrap = AttributeKey("unwp")
    /// The token that holds the key: `com.apple.setoken` for the Secure Enclave.
    public static let tokenID = AttributeKey("tkid")
    // Attributes every stored item has; the engine owns them, so they are not in `ItemClass.attributes`.
    public static let accessGroup = AttributeKey("agrp")
    public static let accessible = AttributeKey("pdmn")
    public static let synchronizable = AttributeKey("sync")
    public static let accessControl = AttributeKey("accc")
    public static let creationDate = AttributeKey("cdat")
    public static let modificationDate = AttributeKey("mdat")

    private static let kinds: [AttributeKey: Kind] = [
        .account: .string, .service: .string, .generic: .data, .label: .string, .description: .string,
        .comment: .string, .creator: .number, .type: .number, .isInvisible: .bool, .isNegative: .bool,
        .securityDomain: .string, .server: .string, .protocol: .string, .authenticationType: .string,
        .port: .number, .path: .string,
        .certificateType: .number, .certificateEncoding: .number, .subject: .data, .issuer: .data,
        .serialNumber: .data, .subjectKeyID: .data, .publicKeyHash: .data,
        .keyClass: .number, .applicationLabel: .data, .applicationTag: .data, .keySizeInBits: .number,
        .effectiveKeySize: .number, .startDate: .date, .endDate: .date, .isPermanent: .bool,
        .isSensitive: .bool, .isExtractable: .bool, .canEncrypt: .bool, .canDecrypt: .bool,
        .canDerive: .bool, .canSign: .bool, .canVerify: .bool, .canWrap: .bool, .canUnwrap: .bool, .tokenID: .string,
        .accessGroup: .string, .creationDate: .date, .modificationDate: .date,
    ]

    /// The kind of value, for class attributes and the engine's string and date attributes.
    public var kind: Kind? { Self.kinds[self] }

    /// Apple keeps these text attributes as blobs (`SecItemSchema.c`; `copyBlob` in
    /// `SecDbItem.c`): a string or data is stored as given and read back as the same type, and
    /// the two are different values (SQLite never finds a text equal to a blob), so an item added
    /// with its account as data is found by that data, not by the string.
    public var isBlob: Bool { Self.blobs.contains(self) }

    private static let blobs: Set<AttributeKey> = [
        .account, .service, .generic, .label, .description, .comment, .securityDomain, .server, .authenticationType, .path,
    ]

    /// Whether `value` can be stored under this attribute: a value of its kind, or for a blob
    /// either a string or data.
    public func accepts(_ value: AttributeValue) -> Bool {
        value.kind == kind || (isBlob && (value.kind == .string || value.kind == .data))
    }

    /// Apple's constant name without `kSecAttr`, as the command line and JSON spell it:
    /// `account` for `kSecAttrAccount`. Keys Keyferry does not know keep their short code.
    public var name: String { Self.names[self] ?? rawValue }

    /// Accepts the name (`account`), Apple's constant (`kSecAttrAccount`) or the short code
    /// (`acct`): the spellings app code uses. `keyType` (`kSecAttrKeyType`) is Apple's name for
    /// the code `type` on keys.
    public init?(name: String) {
        let bare = name.hasPrefix("kSecAttr") ? String(name.dropFirst(8)) : name
        let lowered = bare.prefix(1).lowercased() + bare.dropFirst()
        if let key = Self.byName[lowered] ?? Self.aliases[lowered] {
            self = key
        } else if Self.kinds[AttributeKey(name)] != nil {
            self = AttributeKey(name)
        } else {
            return nil
        }
    }

    private static let names: [AttributeKey: String] = [
        .account: "account", .service: "service", .generic: "generic", .label: "label", .description: "description",
        .comment: "comment", .creator: "creator", .type: "type", .isInvisible: "isInvisible", .isNegative: "isNegative",
        .securityDomain: "securityDomain", .server: "server", .protocol: "protocol", .authenticationType: "authenticationType",
        .port: "port", .path: "path",
        .certificateType: "certificateType", .certificateEncoding: "certificateEncoding", .subject: "subject",
        .issuer: "issuer", .serialNumber: "serialNumber", .subjectKeyID: "subjectKeyID", .publicKeyHash: "publicKeyHash",
        .keyClass: "keyClass", .applicationLabel: "applicationLabel", .applicationTag: "applicationTag",
        .keySizeInBits: "keySizeInBits", .effectiveKeySize: "effectiveKeySize", .startDate: "startDate", .endDate: "endDate",
        .isPermanent: "isPermanent", .isSensitive: "isSensitive", .isExtractable: "isExtractable",
        .canEncrypt: "canEncrypt", .canDecrypt: "canDecrypt", .canDerive: "canDerive", .canSign: "canSign",
        .canVerify: "canVerify", .canWrap: "canWrap", .canUnwrap: "canUnwrap", .tokenID: "tokenID",
        .accessGroup: "accessGroup", .accessible: "accessible", .synchronizable: "synchronizable",
        .accessControl: "accessControl", .creationDate: "creationDate", .modificationDate: "modificationDate",
    ]
    private static let byName = Dictionary(uniqueKeysWithValues: names.map { ($0.value, $0.key) })
    /// Apple's second names for a code (`kSecAttrKeyType` and `kSecAttrType` are both `type`).
    private static let aliases: [String: AttributeKey] = ["keyType": .type]
}

extension ItemClass {
    private static let passwordCommon: [AttributeKey] = [
        .label, .description, .comment, .creator, .type, .isInvisible, .isNegative,
    ]

    /// Class-specific attributes an item of this class may carry (the engine's own attributes,
    /// `agrp pdmn sync accc cdat mdat`, are handled apart).
    public var attributes: Set<AttributeKey> { Self.attributeSets[self]! }

    // Built once: every call validates against these sets.
    private static let attributeSets = Dictionary(uniqueKeysWithValues: allCases.map { ($0, $0.makeAttributes()) })

    private func makeAttributes() -> Set<AttributeKey> {
        switch self {
        case .genericPassword:
            Set(Self.passwordCommon + [.account, .service, .generic])
        case .internetPassword:
            Set(Self.passwordCommon + [.account, .securityDomain, .server, .protocol, .authenticationType, .port, .path])
        case .certificate:
            [.label, .certificateType, .certificateEncoding, .subject, .issuer, .serialNumber, .subjectKeyID, .publicKeyHash]
        case .key:
            [
                .label, .keyClass, .applicationLabel, .applicationTag, .creator, .type, .keySizeInBits, .effectiveKeySize,
                .startDate, .endDate, .isPermanent, .isSensitive, .isExtractable, .canEncrypt, .canDecrypt, .canDerive,
                .canSign, .canVerify, .canWrap, .canUnwrap, .tokenID,
            ]
        case .identity:
            ItemClass.certificate.makeAttributes().union(ItemClass.key.makeAttributes())
        }
    }

    /// The class's part of the primary key, in a fixed order (access group and synchronizable
    /// complete it). Apple's `SecItemSchema.c` defines the same sets.
    public var primaryKey: [AttributeKey] {
        switch self {
        case .genericPassword: [.account, .service]
        case .internetPassword: [.account, .securityDomain, .server, .protocol, .authenticationType, .port, .path]
        case .certificate: [.certificateType, .issuer, .serialNumber]
        case .key: [.keyClass, .applicationLabel, .applicationTag, .creator, .type, .keySizeInBits, .effectiveKeySize, .startDate, .endDate]
        case .identity: []
        }
    }
}
