import Foundation
import KeychainModel
import KeychainTesting
import KeyferrySecurity
import Testing

/// Code written against Apple's declarations, in the ways open-source keychain wrappers write it:
/// SecItem functions kept as values of Apple's function types, constants passed as objects, an
/// NSDictionary for a CFDictionary. This file is such code; it compiling is half the test.
@Suite("Apple's types, exactly")
struct AppleTypesTests {
    let t: TestDevice
    let context: KeyferryContext

    init() throws {
        t = try TestDevice()
        context = KeyferryContext(device: t.device, app: TestDevice.appID, passcode: t.passcode)
    }

    typealias RetrieveFunction = (_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus
    typealias RemoveFunction = (_ query: CFDictionary) -> OSStatus

    @Test("the four SecItem functions kept as values of Apple's function types and called through them; the audit says such a call has no line")
    func functionValues() throws {
        let add: (CFDictionary, UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus = SecItemAdd
        let retrieve: RetrieveFunction = SecItemCopyMatching
        let update: (CFDictionary, CFDictionary) -> OSStatus = SecItemUpdate
        let remove: RemoveFunction = SecItemDelete
        let query = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"] as CFDictionary
        context.run {
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                kSecValueData as String: Data("1".utf8), kSecAttrAccessible as String: kSecAttrAccessibleAlways,
            ]
            #expect(add(item as CFDictionary, nil) == errSecSuccess)
            #expect(update(query, [kSecValueData: Data("2".utf8)] as CFDictionary) == errSecSuccess)
            var result: CFTypeRef?
            #expect(retrieve([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecReturnData: true] as CFDictionary, &result) == errSecSuccess)
            #expect(result as? Data == Data("2".utf8))
            #expect(remove(query) == errSecSuccess)
            #expect(remove(query) == errSecItemNotFound)
        }
        context.flushAudit()
        let findings = try context.audit.read().findings
        #expect(findings.map(\.trap) == [.deprecatedAlways])
        #expect(findings.first?.file == "(a call through a function value)")
    }

    @Test("a constant passes where AnyObject or CFTypeRef is expected and sits in a [String: AnyObject] beside kCFBooleanTrue; elsewhere it is a string")
    func constantsAsObjects() throws {
        func name(of itemClass: AnyObject) -> String? { itemClass as? String }
        #expect(name(of: kSecClassGenericPassword) == "genp")
        let protection: CFTypeRef = kSecAttrAccessibleAfterFirstUnlock
        #expect(protection as? String == "ck")
        let plain = kSecClass
        #expect(type(of: plain) == String.self)

        let attributes: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a" as AnyObject,
            kSecValueData as String: Data("1".utf8) as AnyObject, kSecAttrAccessible as String: protection,
        ]
        let query: [String: AnyObject] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a" as AnyObject,
            kSecReturnAttributes as String: kCFBooleanTrue, kSecReturnData as String: kCFBooleanTrue,
        ]
        var result: CFTypeRef?
        context.run {
            #expect(SecItemAdd(attributes as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess)
        }
        let found = try #require(result as? [String: AnyObject])
        #expect(found[kSecAttrAccessible as String] as? String == kSecAttrAccessibleAfterFirstUnlock)
        #expect(found[kSecValueData as String] as? Data == Data("1".utf8))
    }

    @Test("an LAContext sits in a [String: AnyHashable] query, as an NSObject does, and the call reads it")
    func contextInAHashableQuery() throws {
        try context.run {
            let laContext = LAContext()
            laContext.interactionNotAllowed = true
            let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, .userPresence, nil))
            #expect(
                SecItemAdd(
                    [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "h", kSecAttrAccessControl: control, kSecValueData: Data("v".utf8)] as CFDictionary,
                    nil)
                    == errSecSuccess)
            let query: [String: AnyHashable] = [
                kSecClass as String: kSecClassGenericPassword as String, kSecAttrAccount as String: "h", kSecReturnData as String: true,
                kSecUseAuthenticationContext as String: laContext,
            ]
            #expect(query[kSecUseAuthenticationContext as String] == AnyHashable(laContext) && AnyHashable(laContext) != AnyHashable(LAContext()))
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecInteractionNotAllowed, "the context that allows no prompt is read")
        }
    }

    @Test("an NSDictionary is a CFDictionary; a result reads as NSDictionary, [String: Any] or [CFString: Any]")
    func foundationDictionaries() throws {
        let attributes = NSMutableDictionary()
        attributes[kSecClass] = kSecClassGenericPassword
        attributes[kSecAttrAccount] = "a"
        attributes[kSecValueData] = Data("1".utf8)
        let query = NSDictionary(dictionary: [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a", kSecReturnAttributes: true])
        var result: CFTypeRef?
        context.run {
            #expect(SecItemAdd(attributes, nil) == errSecSuccess)
            #expect(SecItemCopyMatching(query, &result) == errSecSuccess)
        }
        #expect((result as? NSDictionary)?[kSecAttrAccount] as? String == "a")
        #expect((result as? [String: Any])?[kSecAttrAccount as String] as? String == "a")
        #expect((result as? [CFString: Any])?[kSecAttrAccount] as? String == "a")
    }

    @Test("every kSec constant has its object, so no name compiles as a string and fails as an object")
    func everyConstantHasItsObject() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources").standardized
        func names(_ file: String) throws -> Set<String> {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let pattern = try Regex(#"public (?:let|var) (k[A-Za-z0-9]+)"#)
            return Set(text.matches(of: pattern).compactMap { $0.output[1].substring.map(String.init) })
        }
        let strings = try names("SecConstants/SecConstants.swift")
        let objects = try names("SecConstantObjects/SecConstantObjects.swift")
        #expect(strings.count > 100)
        #expect(strings.subtracting(objects).isEmpty, "no object for \(strings.subtracting(objects).sorted())")
        #expect(objects.subtracting(strings).isEmpty, "no string for \(objects.subtracting(strings).sorted())")
    }
}
