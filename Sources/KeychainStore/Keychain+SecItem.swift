import Foundation
import KeychainModel

/// Keychain Services' four functions over dictionaries, for code written against Apple's API:
///
///     var result: Any?
///     let status = keychain.SecItemCopyMatching([kSecClass: kSecClassGenericPassword,
///         kSecAttrAccount: "token", kSecReturnData: true], &result)
///
/// Each returns Apple's status only; the typed API throws the same status with a sentence.
extension Keychain {
    public func SecItemAdd(_ attributes: [String: Any], _ result: UnsafeMutablePointer<Any?>?) -> OSStatus {
        status {
            let item = try SecDictionary.newItem(attributes)
            if item.returning.contains(.ref) {
                throw KeychainError(.unimplemented, "kSecReturnRef: Keyferry has no SecKey or SecCertificate objects.")
            }
            let record = try add(item)
            result?.pointee = SecDictionary.result([record], returning: item.returning, matchLimit: .one)
        }
    }

    public func SecItemCopyMatching(_ query: [String: Any], _ result: UnsafeMutablePointer<Any?>?) -> OSStatus {
        status {
            let parsed = try SecDictionary.query(query, for: .copy)
            let records = try copy(parsed)
            result?.pointee = SecDictionary.result(records, returning: parsed.returning, matchLimit: parsed.matchLimit ?? .one)
        }
    }

    public func SecItemUpdate(_ query: [String: Any], _ attributesToUpdate: [String: Any]) -> OSStatus {
        status {
            let parsed = try SecDictionary.query(query, for: .update)
            try update(parsed, with: try SecDictionary.changes(attributesToUpdate, itemClass: parsed.itemClass))
        }
    }

    public func SecItemDelete(_ query: [String: Any]) -> OSStatus {
        status { try delete(try SecDictionary.query(query, for: .delete)) }
    }

    private func status(_ body: () throws -> Void) -> OSStatus {
        do {
            try body()
            return errSecSuccess
        } catch let error as KeychainError {
            return error.status.rawValue
        } catch {
            return errSecInternalError
        }
    }
}
