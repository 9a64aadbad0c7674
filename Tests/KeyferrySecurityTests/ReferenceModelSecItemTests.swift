import Foundation
import KeychainModel
import KeychainTesting
import KeyferrySecurity
import Testing

/// The model-based sequences of KeychainStoreTests, through Keychain Services' dictionaries and
/// through the typed API side by side: both agree with the model and with each other, call by call.
@Suite("SecItem against the reference model")
struct ReferenceModelSecItemTests {
    @Test("seeded random sequences: the same statuses and secrets through SecItem as through the typed API", arguments: 1...12)
    func sameAsTypedAPI(seed: UInt64) throws {
        let typedDevice = try TestDevice(grace: 10, seed: seed)
        let typed = try ReferenceRun(seed: seed, device: typedDevice, through: TypedKeychain(try typedDevice.keychain()))
        let secDevice = try TestDevice(grace: 10, seed: seed)
        let sec = try ReferenceRun(
            seed: seed, device: secDevice,
            through: SecItemKeychain(
                context: KeyferryContext(device: secDevice.device, app: TestDevice.appID, passcode: secDevice.passcode)))
        #expect(sec.disagreements.isEmpty, "\(sec.disagreements.prefix(5))")
        #expect(sec.trace == typed.trace)
        #expect(sec.seen[.interactionNotAllowed, default: 0] > 0 && sec.seen[.duplicateItem, default: 0] > 0)
    }
}

/// The model's operations as app code writes them: dictionaries of kSec keys.
struct SecItemKeychain: KeychainUnderTest {
    let context: KeyferryContext

    func add(_ item: ReferenceKeychain.Item) -> KeychainStatus {
        let attributes: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: item.account,
            kSecAttrService as String: item.service, kSecValueData as String: item.data,
            kSecAttrSynchronizable as String: item.synchronizable, kSecAttrAccessible as String: item.protection.rawValue,
        ]
        return status(context.run { SecItemAdd(attributes as CFDictionary, nil) })
    }

    func copy(_ query: ReferenceKeychain.Query) -> (KeychainStatus, [Data]) {
        var dictionary = Self.search(query)
        dictionary[kSecReturnData as String] = kCFBooleanTrue
        dictionary[kSecMatchLimit as String] = query.limit == 1 ? kSecMatchLimitOne : kSecMatchLimitAll
        var result: CFTypeRef?
        let code = context.run { SecItemCopyMatching(dictionary as CFDictionary, &result) }
        let data = query.limit == 1 ? (result as? Data).map { [$0] } ?? [] : (result as? [Data]) ?? []
        return (status(code), data)
    }

    func update(_ query: ReferenceKeychain.Query, _ changes: ReferenceKeychain.Changes) -> KeychainStatus {
        var attributes: [String: Any] = [:]
        if let account = changes.account { attributes[kSecAttrAccount as String] = account }
        if let label = changes.label { attributes[kSecAttrLabel as String] = label }
        if let protection = changes.protection { attributes[kSecAttrAccessible as String] = protection.rawValue }
        if let data = changes.data { attributes[kSecValueData as String] = data }
        return status(context.run { SecItemUpdate(Self.search(query) as CFDictionary, attributes as CFDictionary) })
    }

    func delete(_ query: ReferenceKeychain.Query) -> KeychainStatus {
        status(context.run { SecItemDelete(Self.search(query) as CFDictionary) })
    }

    static func search(_ query: ReferenceKeychain.Query) -> [String: Any] {
        var dictionary: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
        if let account = query.account { dictionary[kSecAttrAccount as String] = account }
        if let service = query.service { dictionary[kSecAttrService as String] = service }
        if let protection = query.protection { dictionary[kSecAttrAccessible as String] = protection.rawValue }
        switch query.synchronizable {
        case .no: break
        case .yes: dictionary[kSecAttrSynchronizable as String] = kCFBooleanTrue
        case .any: dictionary[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
        }
        return dictionary
    }

    private func status(_ code: OSStatus) -> KeychainStatus { KeychainStatus(rawValue: code) }
}
