import Foundation
import KeychainModel
import Testing

@testable import KeyferrySecurity

/// Keychain Services dictionaries read into typed calls.
@Suite("SecItem dictionaries")
struct SecDictionaryTests {
    @Test("dictionaries parse into typed queries with Apple's rules")
    func dictionaries() throws {
        let query = try SecDictionary.query(
            [
                kSecClass: kSecClassInternetPassword, kSecAttrServer: "example.com", kSecAttrPort: 443,
                kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true,
                kSecAttrSynchronizable: kSecAttrSynchronizableAny,
            ], for: .copy)
        #expect(query.itemClass == .internetPassword)
        #expect(query.attributes == [.server: .string("example.com"), .port: .number(443)])
        #expect(query.matchLimit == .all)
        #expect(query.synchronizable == .any)
        #expect(query.returning == .attributes)
        let key = try SecDictionary.newItem([kSecClass: kSecClassKey, kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate])
        #expect(key.attributes[.type] == .number(42))
        #expect(throws: KeychainError(.param, "the dictionary has no kSecClass.")) { try SecDictionary.query([:], for: .copy) }
        #expect(throws: KeychainError.self) { try SecDictionary.changes([kSecReturnData: true], itemClass: .genericPassword) }
        #expect(throws: KeychainError.self) { try SecDictionary.query([kSecClass: kSecClassGenericPassword, kSecMatchLimit: kSecMatchLimitOne], for: .add) }
    }
}
