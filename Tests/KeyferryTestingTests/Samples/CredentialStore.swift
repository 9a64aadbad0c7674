// App code as it is written for Apple's platforms, in the style of the seeds' wrappers: only
// the import differs on Linux. Nothing here knows about Keyferry.
#if canImport(Security)
import Security
#else
import KeyferrySecurity
#endif
#if canImport(LocalAuthentication)
import LocalAuthentication
#endif
import Foundation
import KeychainModel

enum CredentialStoreError: Error, Equatable {
    case notFound
    case badData
    case accessControl
    case unhandled(OSStatus)
}

/// A type-safe wrapper: add-or-update, Codable values, a biometric item.
struct CredentialStore {
    let service: String

    func save(_ data: Data, account: String, accessibility: CFString = kSecAttrAccessibleAfterFirstUnlock) throws {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account,
        ]
        let attributes: [CFString: Any] = [kSecValueData: data, kSecAttrAccessible: accessibility]
        var status = SecItemUpdate(query as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            status = SecItemAdd(query.merging(attributes) { $1 } as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw CredentialStoreError.unhandled(status) }
    }

    func read(account: String) throws -> Data {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: account,
            kSecReturnData as String: kCFBooleanTrue!,
            kSecMatchLimit as String: kSecMatchLimitOne,
        ]
        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        switch status {
        case errSecSuccess:
            guard let data = result as? Data else { throw CredentialStoreError.badData }
            return data
        case errSecItemNotFound:
            throw CredentialStoreError.notFound
        default:
            throw CredentialStoreError.unhandled(status)
        }
    }

    func save<Value: Encodable>(_ value: Value, account: String) throws {
        try save(try JSONEncoder().encode(value), account: account)
    }

    func read<Value: Decodable>(_ type: Value.Type, account: String) throws -> Value {
        try JSONDecoder().decode(type, from: try read(account: account))
    }

    /// Every account stored under the service.
    func accounts() throws -> [String] {
        let query = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecReturnAttributes: true,
            kSecMatchLimit: kSecMatchLimitAll,
        ] as CFDictionary
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [[String: Any]] else { throw CredentialStoreError.unhandled(status) }
        return items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted()
    }

    func delete(account: String) throws {
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: account]
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw CredentialStoreError.unhandled(status) }
    }

    /// An item only the enrolled face or finger opens; a new enrollment locks it for good.
    func saveBiometric(_ data: Data, account: String) throws {
        var error: Unmanaged<CFError>?
        guard let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly,
                                                           .biometryCurrentSet, &error) else {
            _ = error?.takeRetainedValue()
            throw CredentialStoreError.accessControl
        }
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account,
            kSecValueData: data,
            kSecAttrAccessControl: access,
        ]
        let status = SecItemAdd(query as CFDictionary, nil)
        guard status == errSecSuccess else { throw CredentialStoreError.unhandled(status) }
    }

    func readBiometric(account: String, context: LAContext) throws -> Data {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account,
            kSecReturnData: true,
            kSecUseAuthenticationContext: context,
            kSecUseOperationPrompt: "Unlock your vault",
        ]
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { throw CredentialStoreError.unhandled(status) }
        guard let data = result as? Data else { throw CredentialStoreError.badData }
        return data
    }

    /// Whether the enrolled faces or fingers changed since `saved` was taken.
    static func biometryChanged(since saved: Data?) -> Bool {
        let context = LAContext()
        var error: NSError?
        guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else { return true }
        return context.evaluatedPolicyDomainState != saved
    }
}
