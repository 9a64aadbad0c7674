import Foundation
package import KeychainModel

/// Translates Keychain Services dictionaries (`[kSecClass: kSecClassGenericPassword, ...]`)
/// into typed calls and typed results back into what `SecItemCopyMatching` returns.
package enum SecDictionary {
    package enum Operation: Sendable { case add, copy, update, delete }

    // MARK: Parsing

    /// A dictionary's keys as the strings they are (`kSecClass` and the rest); any other key
    /// is errSecParam.
    package static func strings(_ dictionary: CFDictionary) throws(KeychainError) -> [String: Any] {
        var out: [String: Any] = [:]
        out.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            guard let name = key.base as? String else {
                throw KeychainError(.param, "'\(key.base)' is not a Keychain Services key; keys are kSec constants.")
            }
            out[name] = value
        }
        return out
    }

    package static func newItem(_ dictionary: [String: Any]) throws(KeychainError) -> NewItem {
        let parts = try Parts(dictionary, operation: .add)
        if parts.protection != nil && parts.accessControl != nil {
            throw KeychainError(
                .param, "kSecAttrAccessible and kSecAttrAccessControl cannot both be given; the access control already carries the accessibility.")
        }
        if parts.persistentReference != nil { throw KeychainError(.param, "kSecValuePersistentRef cannot be added.") }
        var attributes = parts.attributes
        var data = parts.data
        switch parts.reference {
        case .key(let key):
            attributes = key.itemAttributes.merging(attributes) { $1 }
            data = data ?? key.material.externalRepresentation
        case .certificate(let certificate):
            attributes = certificate.itemAttributes.merging(attributes) { $1 }
            data = data ?? certificate.der
        case .identity:
            throw KeychainError(.internalError, "an identity is two items: SecItemAdd adds them with newIdentity.")
        case nil:
            // A certificate's DER says its attributes, as a ref's would.
            if parts.itemClass == .certificate, let der = data, let certificate = SecCertificate(der: der) {
                attributes = certificate.itemAttributes.merging(attributes) { $1 }
            }
        }
        return NewItem(
            parts.itemClass, attributes: attributes, data: data ?? Data(), accessGroup: parts.accessGroup,
            protection: parts.protection, accessControl: parts.accessControl,
            synchronizable: try parts.synchronizableSetting() ?? false, returning: parts.returning,
            useDataProtectionKeychain: parts.useDataProtectionKeychain)
    }

    /// An identity to add (`kSecValueRef` with a `SecIdentity`): its certificate and private key,
    /// with the dictionary's group, accessibility and return keys; nil for any other add.
    package static func newIdentity(_ dictionary: [String: Any]) throws(KeychainError) -> (certificate: NewItem, privateKey: NewItem)? {
        guard let identity = dictionary[kSecValueRef] as? SecIdentity else { return nil }
        var others = dictionary
        others[kSecValueRef] = nil
        others[kSecClass] = kSecClassCertificate
        let given = try newItem(others)
        var (certificate, privateKey) = identity.newItems
        (certificate.accessGroup, privateKey.accessGroup) = (given.accessGroup, given.accessGroup)
        (certificate.protection, privateKey.protection) = (given.protection, given.protection)
        (certificate.accessControl, privateKey.accessControl) = (given.accessControl, given.accessControl)
        (certificate.synchronizable, privateKey.synchronizable) = (given.synchronizable, given.synchronizable)
        (certificate.useDataProtectionKeychain, privateKey.useDataProtectionKeychain) = (given.useDataProtectionKeychain, given.useDataProtectionKeychain)
        certificate.attributes.merge(given.attributes) { $1 }
        privateKey.attributes[.label] = given.attributes[.label] ?? privateKey.attributes[.label]
        certificate.returning = given.returning
        return (certificate, privateKey)
    }

    package static func query(_ dictionary: [String: Any], for operation: Operation) throws(KeychainError) -> ItemQuery {
        let parts = try Parts(dictionary, operation: operation)
        if parts.data != nil { throw KeychainError(.param, "kSecValueData belongs in an add or in the update dictionary, not in a search.") }
        // Apple keeps a search's access control as the one an add would set (`q_access_control`
        // in SecItemServer.c) and matches nothing on it: wrappers name it in every query of
        // their items. It narrows nothing here either.
        // A persistent reference names one item: no implicit kSecAttrSynchronizable = false.
        let synchronizable = parts.synchronizable ?? (parts.persistentReference == nil ? .no : .any)
        var attributes = parts.attributes
        switch parts.reference {
        case .key(let key):
            // A key is found by what Apple finds it by: its class and application label.
            attributes[.keyClass] = .number(key.material.isPrivate ? 1 : 0)
            attributes[.applicationLabel] = key.attributes[.applicationLabel] ?? .data(key.material.applicationLabel)
        case .certificate(let certificate):
            attributes.merge(certificate.identifyingAttributes) { $1 }
        case .identity(let identity):
            attributes.merge(identity.certificate.identifyingAttributes) { $1 }
        case nil:
            break
        }
        return ItemQuery(
            parts.itemClass, attributes: attributes, accessGroup: parts.accessGroup, protection: parts.protection,
            synchronizable: synchronizable, persistentReference: parts.persistentReference,
            matchLimit: parts.matchLimit, returning: parts.returning, authentication: parts.authentication,
            useDataProtectionKeychain: parts.useDataProtectionKeychain)
    }

    /// The second dictionary of `SecItemUpdate`, checked against the class being updated.
    package static func changes(_ dictionary: [String: Any], itemClass: ItemClass) throws(KeychainError) -> ItemChanges {
        if dictionary[kSecClass] != nil { throw KeychainError(.param, "kSecClass cannot appear in the update dictionary.") }
        for key in dictionary.keys.sorted() where key.hasPrefix("r_") || key.hasPrefix("m_") || key.hasPrefix("u_") {
            throw KeychainError(.param, "'\(key)' is a search or return key and cannot appear in the update dictionary.")
        }
        if dictionary[kSecAttrAccessControl] != nil {
            throw KeychainError(.param, "access control cannot be changed in place; delete the item and add it again.")
        }
        var withClass = dictionary
        withClass[kSecClass] = itemClass.rawValue
        let parts = try Parts(withClass, operation: .update)
        if parts.persistentReference != nil { throw KeychainError(.param, "kSecValuePersistentRef cannot be changed.") }
        return ItemChanges(
            attributes: parts.attributes, accessGroup: parts.accessGroup, protection: parts.protection,
            synchronizable: try parts.synchronizableSetting(), data: parts.data)
    }

    /// An object app code hands over as `kSecValueRef`.
    enum Reference {
        case key(SecKey), certificate(SecCertificate), identity(SecIdentity)

        init?(_ object: AnyObject) {
            switch object {
            case let key as SecKey: self = .key(key)
            case let certificate as SecCertificate: self = .certificate(certificate)
            case let identity as SecIdentity: self = .identity(identity)
            default: return nil
            }
        }

        var itemClass: ItemClass {
            switch self {
            case .key: .key
            case .certificate: .certificate
            case .identity: .identity
            }
        }
    }

    /// Every key of a dictionary, sorted into its place.
    struct Parts {
        var itemClass: ItemClass
        var attributes = Attributes()
        var accessGroup: String?
        var protection: ProtectionClass?
        var accessControl: AccessControl?
        var synchronizable: SynchronizableMatch?
        var data: Data?
        var persistentReference: PersistentReference?
        var matchLimit: MatchLimit?
        var returning: ReturnOptions = []
        var authentication = AuthenticationContext()
        var useDataProtectionKeychain: Bool?
        /// `kSecValueRef`: an object to add, or to find by what identifies it.
        var reference: Reference?

        /// `kSecAttrSynchronizable` as a value to store: nil when absent; `SynchronizableAny`,
        /// which only searches may use, is refused.
        func synchronizableSetting() throws(KeychainError) -> Bool? {
            switch synchronizable {
            case .any: throw KeychainError(.param, "kSecAttrSynchronizableAny is for searches; set true or false on an item.")
            case .yes: true
            case .no: false
            case nil: nil
            }
        }

        init(_ dictionary: [String: Any], operation: Operation) throws(KeychainError) {
            // An object given as kSecValueRef says its class, as Apple's client reads it from the
            // ref; so does a persistent reference, which names its item by itself.
            let implied: Any? =
                (dictionary[kSecValueRef] as? AnyObject).flatMap(Reference.init)?.itemClass.rawValue
                ?? (dictionary[kSecValuePersistentRef] as? Data).flatMap { try? PersistentReference(data: $0) }?.itemClass.rawValue
            guard let rawClass = dictionary[kSecClass] ?? implied else { throw KeychainError(.param, "the dictionary has no kSecClass.") }
            // Apple's values (`genp`) first: they are what the constants hold.
            guard let name = rawClass as? String, let itemClass = ItemClass(rawValue: name) ?? ItemClass(name: name) else {
                throw KeychainError(.noSuchClass, "'\(rawClass)' is not a keychain item class.")
            }
            self.itemClass = itemClass
            for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) where key != kSecClass {
                try take(key, value, operation)
            }
        }

        private mutating func take(_ key: String, _ value: Any, _ operation: Operation) throws(KeychainError) {
            switch key {
            case kSecAttrAccessGroup: accessGroup = try Convert.string(value, key)
            case kSecAttrAccessible:
                guard let protection = Convert.protection(value) else {
                    throw KeychainError(.param, "'\(value)' is not a kSecAttrAccessible value.")
                }
                self.protection = protection
            case kSecAttrAccessControl:
                guard let accessControl = value as? AccessControl else {
                    throw KeychainError(.param, "kSecAttrAccessControl takes a value made by SecAccessControlCreateWithFlags.")
                }
                self.accessControl = accessControl
            case kSecAttrSynchronizable:
                if let any = value as? String, any == kSecAttrSynchronizableAny {
                    synchronizable = .any
                } else {
                    synchronizable = try Convert.bool(value, key) ? .yes : .no
                }
            case kSecAttrCreationDate, kSecAttrModificationDate:
                // Apple matches the exact stored time, a plaintext column; here the dates are
                // sealed with the item's metadata, so a search on them could not run while locked.
                guard operation == .copy || operation == .delete else {
                    throw KeychainError(.readOnlyAttr, "'\(key)' is kept by the keychain and cannot be set.")
                }
                throw KeychainError(
                    .unimplemented,
                    "'\(key)': Keyferry keeps item dates sealed, so it cannot search on them in every lock state as Apple does; read them with kSecReturnAttributes and compare."
                )
            case kSecValueData:
                guard operation == .add || operation == .update else { throw KeychainError(.param, "kSecValueData cannot be searched on.") }
                data = try Convert.data(value, key)
            case kSecValuePersistentRef:
                persistentReference = try PersistentReference(data: try Convert.data(value, key))
            case kSecValueRef:
                guard let reference = (value as? AnyObject).flatMap(Reference.init), reference.itemClass == itemClass else {
                    throw KeychainError(.param, "kSecValueRef takes a SecKey, SecCertificate or SecIdentity of the dictionary's kSecClass.")
                }
                self.reference = reference
            case kSecMatchLimit:
                guard operation != .add else { throw KeychainError(.param, "kSecMatchLimit cannot appear in an add.") }
                matchLimit = try Convert.matchLimit(value)
            case kSecReturnData, kSecReturnAttributes, kSecReturnPersistentRef, kSecReturnRef:
                guard operation == .add || operation == .copy else {
                    throw KeychainError(.param, "'\(key)' cannot appear in \(operation == .delete ? "SecItemDelete" : "SecItemUpdate"); it returns nothing.")
                }
                let option: ReturnOptions =
                    switch key {
                    case kSecReturnData: .data
                    case kSecReturnAttributes: .attributes
                    case kSecReturnPersistentRef: .persistentRef
                    default: .ref
                    }
                if try Convert.bool(value, key) { returning.insert(option) }
            case kSecUseAuthenticationUI:
                guard let mode = value as? String, [kSecUseAuthenticationUIAllow, kSecUseAuthenticationUIFail, kSecUseAuthenticationUISkip].contains(mode)
                else {
                    throw KeychainError(.param, "'\(value)' is not a kSecUseAuthenticationUI value.")
                }
                if mode != kSecUseAuthenticationUIAllow { authentication.interactionAllowed = false }
                if mode == kSecUseAuthenticationUISkip { authentication.skipsItemsNeedingAuthentication = true }
            case kSecUseAuthenticationContext:
                guard let context = value as? LAContext else {
                    throw KeychainError(.param, "kSecUseAuthenticationContext takes an LAContext.")
                }
                let allowed = authentication.interactionAllowed
                authentication = context.authentication
                authentication.interactionAllowed = allowed && authentication.interactionAllowed
            case kSecUseNoAuthenticationUI:
                if try Convert.bool(value, key) { authentication.interactionAllowed = false }
            case kSecAttrTokenID where operation == .add || operation == .update:
                throw KeychainError(
                    .param, "kSecAttrTokenID: a Secure Enclave key is made by SecKeyCreateRandomKey with kSecAttrTokenIDSecureEnclave, not added or changed.")
            case kSecUseDataProtectionKeychain:
                useDataProtectionKeychain = try Convert.bool(value, key)
            case kSecUseOperationPrompt:
                break  // Meaningful only to a real UI.
            case kSecUseItemList:
                break  // Kept and never used by Apple's server either (`query_add_use` in SecItemServer.c).
            default:
                let attribute = AttributeKey(rawValue: key)
                guard itemClass.attributes.contains(attribute), attribute.kind != nil else {
                    if key.hasPrefix("m_") || key.hasPrefix("u_") || key.hasPrefix("r_") {
                        throw KeychainError(.unimplemented, "'\(key)' is a Keychain Services option Keyferry does not implement.")
                    }
                    throw KeychainError(.noSuchAttr, "\(itemClass.name) items have no attribute '\(key)'.")
                }
                attributes[attribute] = try Convert.value(value, for: attribute, key)
            }
        }
    }

    // MARK: Results

    /// What `SecItemCopyMatching` (or `SecItemAdd` with return keys) hands back: nil without
    /// return keys; one value for a single match; an array for a match limit above one.
    /// `privateKey` finds an identity's key (its record has the certificate's data).
    package static func result(
        _ records: [ItemRecord], returning: ReturnOptions, matchLimit: MatchLimit,
        privateKey: (ItemRecord) throws(KeychainError) -> SecKey
    ) throws(KeychainError) -> Any? {
        guard !returning.isEmpty else { return nil }
        var values: [Any] = []
        for record in records {
            let object = returning.contains(.ref) ? try refObject(record, privateKey: privateKey) : nil
            // A password has no ref object: asked for nothing else, Apple's client hands back none.
            if returning == .ref, object == nil { return nil }
            values.append(value(record, returning, object: object))
        }
        return matchLimit == .one ? values.first : values
    }

    /// The object `kSecReturnRef` gives for a record; nil for a password, which has none.
    private static func refObject(_ record: ItemRecord, privateKey: (ItemRecord) throws(KeychainError) -> SecKey) throws(KeychainError) -> AnyObject? {
        switch record.itemClass {
        case .key: return try SecKey(record: record)
        case .certificate, .identity:
            guard let certificate = record.data.flatMap(SecCertificate.init(der:)) else {
                throw KeychainError(.decode, "the certificate item's data is not a DER certificate, so no SecCertificate can be made of it.")
            }
            return record.itemClass == .certificate ? certificate : SecIdentity(certificate: certificate, privateKey: try privateKey(record))
        case .genericPassword, .internetPassword: return nil
        }
    }

    private static func value(_ record: ItemRecord, _ returning: ReturnOptions, object: AnyObject?) -> Any {
        var record = record
        if let reference = SecKey.tokenReference(record) { record.data = reference }
        if returning == .data { return record.data ?? Data() }
        if returning == .persistentRef { return record.persistentReference.data }
        if returning == .ref, let object { return object }
        // What Apple's server sends for a ref (class, attributes and data) stays in the
        // dictionary when no ref object can be made of it, as for every password.
        let withRef = returning.contains(.ref)
        var dictionary = returning.contains(.attributes) || withRef ? attributes(of: record) : [:]
        if returning.contains(.data) || (withRef && object == nil) { dictionary[kSecValueData] = record.data ?? Data() }
        if let object { dictionary[kSecValueRef] = object }
        if returning.contains(.persistentRef) { dictionary[kSecValuePersistentRef] = record.persistentReference.data }
        return dictionary
    }

    /// What to ask the store for. `kSecReturnRef` makes Apple's server send the item's class,
    /// attributes and secret: of a key the client makes a `SecKey`, of a password no object. A
    /// certificate or identity needs `SecCertificate` objects, which do not exist here yet.
    package static func storeReturning(_ returning: ReturnOptions, itemClass: ItemClass) throws(KeychainError) -> ReturnOptions {
        guard returning.contains(.ref) else { return returning }
        return returning.subtracting(.ref).union([.data, .attributes])
    }

    /// An item's attributes keyed as `kSecReturnAttributes` returns them.
    package static func attributes(of record: ItemRecord) -> [String: Any] {
        var out: [String: Any] = [
            kSecClass: record.itemClass.rawValue, kSecAttrAccessGroup: record.accessGroup,
            kSecAttrAccessible: record.protection.rawValue, kSecAttrSynchronizable: record.synchronizable,
            kSecAttrCreationDate: record.creationDate, kSecAttrModificationDate: record.modificationDate,
        ]
        if let accessControl = record.accessControl { out[kSecAttrAccessControl] = accessControl }
        // A Mac's file-based keychain has no such columns to return (`gGenericPasswordAttributes`).
        if record.macKeychain == .fileBased {
            (out[kSecAttrAccessGroup], out[kSecAttrAccessible], out[kSecAttrSynchronizable]) = (nil, nil, nil)
        }
        out.merge(attributeValues(record.attributes)) { $1 }
        return out
    }

    /// Class attributes keyed and typed as Apple's dictionaries hold them.
    package static func attributeValues(_ attributes: Attributes) -> [String: Any] {
        var out: [String: Any] = [:]
        for (key, value) in attributes {
            switch value {
            case .string(let s): out[key.rawValue] = s
            case .data(let d): out[key.rawValue] = d
            case .number(let n): out[key.rawValue] = Int(n)
            case .bool(let b): out[key.rawValue] = b
            case .date(let d): out[key.rawValue] = d
            }
        }
        return out
    }
}

/// Conversions of the loosely typed values a dictionary holds.
enum Convert {
    static func string(_ value: Any, _ key: String) throws(KeychainError) -> String {
        guard let s = value as? String else { throw KeychainError(.param, "'\(key)' takes a string.") }
        return s
    }

    static func data(_ value: Any, _ key: String) throws(KeychainError) -> Data {
        if let d = value as? Data { return d }
        if let b = value as? [UInt8] { return Data(b) }
        if let s = value as? String { return Data(s.utf8) }
        throw KeychainError(.param, "'\(key)' takes data.")
    }

    /// A `kSecAttrAccessible` value: Apple's (`ak`) first, as the constants hold, then a name.
    static func protection(_ value: Any) -> ProtectionClass? {
        guard let name = value as? String else { return nil }
        return ProtectionClass(rawValue: name) ?? ProtectionClass(name: name)
    }

    /// A flag, as Apple takes one: a boolean, or a number that is 0 or 1.
    static func bool(_ value: Any, _ key: String) throws(KeychainError) -> Bool {
        if let b = value as? Bool { return b }
        if let n = value as? Int, n == 0 || n == 1 { return n == 1 }
        throw KeychainError(.param, "'\(key)' takes a boolean.")
    }

    /// A number, as Apple's `copyNumber` (`SecDbItem.c`) takes one: a number, a boolean as 0 or
    /// 1, or a string that spells an integer (`kSecAttrKeyTypeRSA` is "42").
    static func number(_ value: Any, _ key: String) throws(KeychainError) -> Int64 {
        switch value {
        case let n as Int: return Int64(n)
        case let n as Int32: return Int64(n)
        case let n as Int64: return n
        case let n as UInt32: return Int64(n)
        case let n as UInt16: return Int64(n)
        case let b as Bool: return b ? 1 : 0
        case let s as String:
            if let n = Int64(s) { return n }
        default: break
        }
        throw KeychainError(.param, "'\(key)' takes a number.")
    }

    /// An attribute's value as Apple's server converts it (`query_add_attribute_with_desc` in
    /// `SecItemServer.c`, with `SecDbItem.c`'s converters): a blob keeps a string or data as
    /// given, a data attribute takes a string's UTF-8 bytes, a number a boolean or numeric string.
    static func value(_ value: Any, for attribute: AttributeKey, _ key: String) throws(KeychainError) -> AttributeValue {
        guard let kind = attribute.kind else { throw KeychainError(.noSuchAttr, "'\(key)' is not a keychain attribute.") }
        if attribute.isBlob {
            if let s = value as? String { return .string(s) }
            if let d = value as? Data { return .data(d) }
            throw KeychainError(.param, "'\(key)' takes a string or data.")
        }
        switch kind {
        case .string: return .string(try string(value, key))
        case .data: return .data(try data(value, key))
        case .number: return .number(try number(value, key))
        case .bool: return .bool(try bool(value, key))
        case .date:
            guard let d = value as? Date else { throw KeychainError(.param, "'\(key)' takes a date.") }
            return .date(d)
        }
    }

    static func matchLimit(_ value: Any) throws(KeychainError) -> MatchLimit {
        if let s = value as? String {
            if s == kSecMatchLimitOne { return .one }
            if s == kSecMatchLimitAll { return .all }
        }
        if let n = value as? Int, n > 0 { return n == 1 ? .one : .count(n) }
        throw KeychainError(.param, "kSecMatchLimit takes kSecMatchLimitOne, kSecMatchLimitAll or a positive count.")
    }
}
