import Foundation
import KeychainModel
import KeyferrySecurity
import KeyferryTesting
import Testing

/// `#if canImport(LocalAuthentication)` code compiles its prompt on Linux too.
@Suite("LocalAuthentication as a module")
struct LocalAuthenticationModuleTests {
    @Test("the sample's guarded prompt path runs, and the simulated user's answer decides")
    func guardedPromptPath() async throws {
        let phone = try SimulatedDevice(biometry: true)
        let app = try phone.install("com.example.vault")
        #expect(await app.run { await BiometricGate.open() })
        app.userWill(.cancel)
        #expect(await app.run { await BiometricGate.open() } == false, "the prompt was shown and cancelled: the path compiled in")
    }
}

/// `.applicationPassword`: the app's own password seals the secret; no read opens it without.
@Suite("Application passwords")
struct ApplicationPasswordTests {
    let phone: SimulatedDevice
    let app: KeyferryContext

    init() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.example.vault")
    }

    private func context(password: String?) -> LAContext {
        let context = app.run { LAContext() }
        if let password { context.setCredential(Data(password.utf8), type: .applicationPassword) }
        return context
    }

    private func read(_ extra: [String: Any]) -> (OSStatus, Data?) {
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault", kSecReturnData as String: true,
        ].merging(extra) { $1 }
        var result: CFTypeRef?
        let status = app.run { SecItemCopyMatching(query as CFDictionary, &result) }
        return (status, result as? Data)
    }

    @Test("the password set with setCredential seals the secret: the right one reads it, a wrong one is errSecAuthFailed, none and no prompt is -25308")
    func sealedByThePassword() throws {
        let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .applicationPassword, nil))
        let add: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault", kSecValueData as String: Data("s3cret".utf8),
            kSecAttrAccessControl as String: control, kSecUseAuthenticationContext as String: context(password: "correct horse"),
        ]
        #expect(app.run { SecItemAdd(add as CFDictionary, nil) } == errSecSuccess)
        #expect(context(password: "x").isCredentialSet(.applicationPassword))

        #expect(read([kSecUseAuthenticationContext as String: context(password: "correct horse")]).1 == Data("s3cret".utf8))
        #expect(read([kSecUseAuthenticationContext as String: context(password: "wrong")]).0 == errSecAuthFailed)
        #expect(read([kSecUseAuthenticationUI as String: kSecUseAuthenticationUIFail]).0 == errSecInteractionNotAllowed)
        app.userWill(.typesPasscode("correct horse"))
        #expect(read([:]).1 == Data("s3cret".utf8), "typed at the system's prompt")
        app.userWill(.cancel)
        #expect(read([:]).0 == errSecUserCanceled)

        let listed = try phone.app("com.example.vault").run { () -> Data? in
            var result: CFTypeRef?
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault", kSecReturnAttributes as String: true,
            ]
            return SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess ? Data() : nil
        }
        #expect(listed != nil, "attributes read without the password, as on a device")

        let update: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault"]
        let wrong = update.merging([kSecUseAuthenticationContext as String: context(password: "wrong")]) { $1 }
        #expect(app.run { SecItemUpdate(wrong as CFDictionary, [kSecValueData as String: Data("n3w".utf8)] as CFDictionary) } == errSecAuthFailed)
        let right = update.merging([kSecUseAuthenticationContext as String: context(password: "correct horse")]) { $1 }
        #expect(app.run { SecItemUpdate(right as CFDictionary, [kSecValueData as String: Data("n3w".utf8)] as CFDictionary) } == errSecSuccess)
        #expect(read([kSecUseAuthenticationContext as String: context(password: "correct horse")]).1 == Data("n3w".utf8), "sealed again under it")
    }
}
