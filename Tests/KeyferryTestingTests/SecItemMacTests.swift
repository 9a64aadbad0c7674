import Foundation
import KeychainModel
import KeyferryTesting
import Testing

/// The same Keychain Services calls on a Mac (`SimulatedDevice(profile: .mac)`), as app code
/// makes them: where kSecUseDataProtectionKeychain sends them, and what a Mac drops on the way.
@Suite("SecItem on a Mac")
struct SecItemMacTests {
    let mac: SimulatedDevice
    let app: KeyferryContext

    init() throws {
        mac = try SimulatedDevice(name: "MacBook", passcode: "login password", biometry: true, profile: .mac)
        app = try mac.install("com.example.notes")
    }

    private func add(_ account: String, _ extra: [CFString: Any] = [:]) -> OSStatus {
        var attributes: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecValueData: Data("\(account)-secret".utf8),
        ]
        attributes.merge(extra) { $1 }
        return app.run { SecItemAdd(attributes as CFDictionary, nil) }
    }

    private func copy(_ account: String?, _ extra: [CFString: Any] = [:]) -> (OSStatus, CFTypeRef?) {
        var query: [CFString: Any] = [kSecClass: kSecClassGenericPassword]
        if let account { query[kSecAttrAccount] = account }
        query.merge(extra) { $1 }
        var result: CFTypeRef?
        let status = app.run { SecItemCopyMatching(query as CFDictionary, &result) }
        return (status, result)
    }

    @Test("an add without kSecUseDataProtectionKeychain lands in the file-based keychain, whose attributes have no accessibility or group")
    func fileBasedByDefault() throws {
        #expect(add("token", [kSecAttrAccessible: kSecAttrAccessibleWhenUnlockedThisDeviceOnly]) == errSecSuccess)
        #expect(copy("token", [kSecUseDataProtectionKeychain: true]).0 == errSecItemNotFound)
        let (status, found) = copy("token", [kSecUseDataProtectionKeychain: false, kSecReturnAttributes: true])
        #expect(status == errSecSuccess)
        let attributes = found as? [String: Any]
        #expect(attributes?[kSecAttrAccount as String] as? String == "token")
        #expect(attributes?[kSecAttrAccessible as String] == nil && attributes?[kSecAttrAccessGroup as String] == nil)
        // The screen lock leaves the login keychain open.
        try mac.lock()
        #expect(copy("token", [kSecReturnData: true]).0 == errSecSuccess)
    }

    @Test("with kSecUseDataProtectionKeychain the Mac behaves as an iPhone: the class is kept and the lock applies")
    func dataProtection() throws {
        #expect(add("token", [kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecUseDataProtectionKeychain: true]) == errSecSuccess)
        let (_, found) = copy("token", [kSecUseDataProtectionKeychain: true, kSecReturnAttributes: true])
        #expect((found as? [String: Any])?[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked as String)
        try mac.lock()
        #expect(copy("token", [kSecUseDataProtectionKeychain: true, kSecReturnData: true]).0 == errSecInteractionNotAllowed)
    }

    @Test("a Mac Catalyst app (or an iPhone app on a Mac) reaches the data protection keychain alone, whatever its calls say")
    func uikitOnMac() throws {
        let catalyst = try mac.install("com.example.catalyst", uikitOnMac: true)
        let item: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: "token", kSecValueData: Data("t".utf8),
            kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecUseDataProtectionKeychain: false,
        ]
        #expect(catalyst.run { SecItemAdd(item as CFDictionary, nil) } == errSecSuccess)
        var found: CFTypeRef?
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "token", kSecReturnAttributes: true]
        #expect(catalyst.run { SecItemCopyMatching(query as CFDictionary, &found) } == errSecSuccess)
        let attributes = found as? [String: Any]
        #expect(attributes?[kSecAttrAccessGroup as String] as? String == "ABCDE12345.com.example.catalyst", "an iPhone's group, kept")
        #expect(attributes?[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked as String)
        try mac.lock()
        var data: CFTypeRef?
        let read: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "token", kSecReturnData: true]
        #expect(catalyst.run { SecItemCopyMatching(read as CFDictionary, &data) } == errSecInteractionNotAllowed, "the lock applies, as on an iPhone")
    }

    @Test("kSecMatchLimitAll with kSecReturnData is errSecParam in the file-based keychain, and a delete there takes one match")
    func fileBasedLimits() {
        for account in ["a", "b", "c"] { #expect(add(account) == errSecSuccess) }
        #expect(copy(nil, [kSecUseDataProtectionKeychain: false, kSecMatchLimit: kSecMatchLimitAll, kSecReturnData: true]).0 == errSecParam)
        let delete: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecUseDataProtectionKeychain: false]
        #expect(app.run { SecItemDelete(delete as CFDictionary) } == errSecSuccess)
        let (_, left) = copy(nil, [kSecMatchLimit: kSecMatchLimitAll, kSecReturnAttributes: true])
        #expect((left as? [Any])?.count == 2)
    }

    @Test("a Mac's biometry is Touch ID")
    func touchID() {
        let context = app.run { LAContext() }
        #expect(app.run { context.biometryType } == .touchID)
    }
}
