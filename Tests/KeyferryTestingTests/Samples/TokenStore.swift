// TokenStore.swift: app code, unchanged for iOS but for the import.
#if canImport(Security)
import Security
#else
import KeyferrySecurity
#endif
import Foundation

struct TokenStore {
    func save(_ token: String) -> OSStatus {
        let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                   kSecAttrAccount as String: "token",
                                   kSecValueData as String: Data(token.utf8)]
        return SecItemAdd(item as CFDictionary, nil)
    }

    func read() -> String? {
        var result: AnyObject?
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                    kSecAttrAccount as String: "token",
                                    kSecReturnData as String: true]
        guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess,
              let data = result as? Data else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
