import Foundation
import KeychainModel

/// Reading the dictionaries of `SecKeyCreateRandomKey` and `SecKeyCreateWithData`, and storing
/// a permanent key as Apple's keychain keeps one.
enum KeyParameters {
    static func kind(_ dictionary: [String: Any]) throws(KeychainError) -> KeyMaterial.Kind {
        guard let type = dictionary[kSecAttrKeyType] else { throw KeychainError(.param, "kSecAttrKeyType is required.") }
        switch try Convert.number(type, kSecAttrKeyType) {
        case 42: return .rsa
        case 73: return .ellipticCurve
        default: throw KeychainError(.param, "kSecAttrKeyType '\(type)' is not kSecAttrKeyTypeRSA or kSecAttrKeyTypeECSECPrimeRandom.")
        }
    }

    /// Whether `kSecAttrTokenID` asks for the Secure Enclave, which makes P-256 keys only and
    /// never synchronizable ones.
    static func isSecureEnclave(_ dictionary: [String: Any], kind: KeyMaterial.Kind, bits: Int) throws(KeychainError) -> Bool {
        guard let token = dictionary[kSecAttrTokenID] else { return false }
        guard token as? String == kSecAttrTokenIDSecureEnclave else {
            throw KeychainError(.param, "kSecAttrTokenID '\(token)': the only token is the Secure Enclave (kSecAttrTokenIDSecureEnclave).")
        }
        guard kind == .ellipticCurve, bits == 256 else {
            throw KeychainError(.param, "the Secure Enclave makes P-256 keys only (kSecAttrKeyTypeECSECPrimeRandom, 256 bits).")
        }
        if let value = dictionary[kSecAttrSynchronizable], try Convert.bool(value, kSecAttrSynchronizable) {
            throw KeychainError(.param, "a Secure Enclave key cannot be synchronizable: it never leaves the device it was made on.")
        }
        return true
    }

    /// `kSecPrivateKeyAttrs` or `kSecPublicKeyAttrs`, keyed by strings; empty when absent.
    static func nested(_ dictionary: [String: Any], _ key: String) throws(KeychainError) -> [String: Any] {
        guard let value = dictionary[key] else { return [:] }
        if let nested = value as? [String: Any] { return nested }
        if let nested = value as? CFDictionary { return try SecDictionary.strings(nested) }
        if let nested = value as? NSDictionary { return try SecDictionary.strings(CFDictionary(nested)) }
        throw KeychainError(.param, "'\(key)' takes a dictionary.")
    }

    static func isPermanent(_ dictionary: [String: Any], default fallback: Bool) throws(KeychainError) -> Bool {
        try dictionary[kSecAttrIsPermanent].map { value throws(KeychainError) in try Convert.bool(value, kSecAttrIsPermanent) } ?? fallback
    }

    /// The attributes a caller may give a key: its tag, label and application label.
    /// (`kSecAttrTokenID` is the key's own, set when the Secure Enclave makes it.)
    static func attributes(_ dictionary: [String: Any]) throws(KeychainError) -> Attributes {
        var out = Attributes()
        for key in [AttributeKey.applicationTag, .label, .applicationLabel] {
            if let value = dictionary[key.rawValue] { out[key] = try Convert.value(value, for: key, key.rawValue) }
        }
        return out
    }

    /// Adds `key` as a keys-class item of the current app: its data is the key's external
    /// representation, as Apple's keychain holds a software key.
    static func store(_ key: SecKey, _ dictionary: [String: Any]) throws(KeychainError) {
        guard let context = KeyferryContext.current else { throw KeyferryContext.missing }
        var item = [String: Any]()
        for name in [kSecAttrAccessible, kSecAttrAccessControl, kSecAttrAccessGroup] as [String] {
            if let value = dictionary[name] { item[name] = value }
        }
        item[kSecClass] = kSecClassKey
        let given = try SecDictionary.newItem(item)
        var parsed = key.newItem
        (parsed.accessGroup, parsed.protection, parsed.accessControl) = (given.accessGroup, given.protection, given.accessControl)
        do {
            _ = try context.backend.add(parsed, app: context.app)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.notAvailable, "\(error)")
        }
    }
}
