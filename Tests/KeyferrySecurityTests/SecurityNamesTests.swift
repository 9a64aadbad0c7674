import Foundation
import KeychainModel
import KeyferrySecurity
import Testing

/// The names keychain wrappers call beside the four SecItem functions, written as they write them.
@Suite("Security and Core Foundation names wrappers use")
struct SecurityNamesTests {
    @Test("SecAccessControlCreateWithFlags from CFOptionFlags; a refusal read through CFErrorGetDomain, CFErrorGetCode and CFErrorCopyUserInfo")
    func accessControlErrors() throws {
        let policy: UInt = SecAccessControlCreateFlags.biometryCurrentSet.rawValue
        var error: Unmanaged<CFError>?
        let control = SecAccessControlCreateWithFlags(
            kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked as CFTypeRef, SecAccessControlCreateFlags(rawValue: CFOptionFlags(policy)), &error)
        #expect(control != nil && error == nil)

        let refused = SecAccessControlCreateWithFlags(kCFAllocatorDefault, "nonsense" as CFTypeRef, [], &error)
        #expect(refused == nil)
        let cfError = try #require(error?.takeRetainedValue())
        #expect(CFErrorGetDomain(cfError) as String == "NSOSStatusErrorDomain")
        #expect(CFErrorGetCode(cfError) == Int(errSecParam))
        let userInfo = try #require(CFErrorCopyUserInfo(cfError) as? [String: Any])
        #expect((userInfo[NSLocalizedDescriptionKey] as? String)?.contains("nonsense") == true)
        #expect(CFErrorCopyDescription(cfError) == userInfo[NSLocalizedDescriptionKey] as? String)
    }

    @Test("SecRandomCopyBytes fills the buffer it is given, differently each time")
    func randomBytes() {
        var first = [UInt8](repeating: 0, count: 32)
        var second = [UInt8](repeating: 0, count: 32)
        #expect(SecRandomCopyBytes(kSecRandomDefault, first.count, &first) == errSecSuccess)
        #expect(SecRandomCopyBytes(nil, second.count, &second) == errSecSuccess)
        #expect(first != second && first != [UInt8](repeating: 0, count: 32))
        var none: [UInt8] = []
        #expect(SecRandomCopyBytes(kSecRandomDefault, -1, &none) == errSecParam)
    }

    @Test("errSec codes carry Apple's values and meanings")
    func statusCodes() {
        #expect(errSecInternalComponent == -2070)
        #expect(errSecWrPerm == -61)
        #expect(errSecNotTrusted == -67843)
        #expect(SecCopyErrorMessageString(errSecNoDefaultKeychain, nil) == "A default keychain could not be found.")
        #expect(SecCopyErrorMessageString(errSecInteractionNotAllowed, nil) == "User interaction is not allowed.")
        #expect(SecCopyErrorMessageString(-99_999, nil) == "OSStatus -99999")
    }
}
