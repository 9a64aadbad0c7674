import Foundation
import KeyferrySecurity
import KeyferryTesting
import Testing

/// Seed 004's UI freeze: each SecItem call blocks its thread (securityd's IPC), a prompt for
/// seconds more, and a call on the main actor is named by the audit.
@Suite("Latency and calls on the main actor")
struct LatencyTests {
    let phone: SimulatedDevice
    let app: KeyferryContext

    init() throws {
        phone = try SimulatedDevice(biometry: true)
        app = try phone.install("com.example.app")
        try app.run { try saveToken() }
    }

    private func saveToken(accessControl: SecAccessControl? = nil, account: String = "authToken") throws {
        var item: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "com.example.app",
            kSecAttrAccount as String: account, kSecValueData as String: Data("t0k3n".utf8),
        ]
        if let accessControl {
            item[kSecAttrAccessControl as String] = accessControl
        } else {
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        }
        #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
    }

    @Test("The seed's @MainActor view model blocks the main actor for the call's latency, and the audit names its line")
    func mainActorViewModel() async throws {
        phone.simulateLatency(call: .milliseconds(40))
        let clock = ContinuousClock()
        let blocked = await app.run {
            await MainActor.run {
                let model = SettingsViewModel()
                let elapsed = clock.measure { model.loadToken() }
                #expect(model.token == "t0k3n")
                return elapsed
            }
        }
        #expect(blocked >= .milliseconds(40))
        let traps = try phone.traps()
        let found = try #require(traps.first { $0.trap == .mainThreadCall })
        #expect(found.file == "KeyferryTestingTests/SettingsViewModel.swift" && found.function == .copyMatching)
        #expect(found.detail?.hasPrefix("blocked it for ") == true, "\(found)")
    }

    @Test("The same read from an actor of its own keeps off the main actor: nothing recorded")
    func actorIsolatedManager() async throws {
        phone.simulateLatency(call: .milliseconds(5))
        let keychain = KeychainManager(service: "com.example.app")
        let token = try await app.run { try await keychain.load(for: "authToken") }
        #expect(token == Data("t0k3n".utf8))
        #expect(try phone.traps().filter { $0.trap == .mainThreadCall }.isEmpty)
    }

    @Test("A read that shows a prompt waits for the user; one with an evaluated LAContext does not")
    func promptLatency() async throws {
        let control = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .biometryCurrentSet, nil))
        try app.run { try saveToken(accessControl: control, account: "vault") }
        phone.simulateLatency(prompt: .seconds(1))
        #expect(app.latency.prompt == .seconds(1))
        let clock = ContinuousClock()
        func read(_ extra: [String: Any] = [:]) -> Duration {
            app.run {
                let query: [String: Any] = [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "vault", kSecReturnData as String: true,
                ].merging(extra) { $1 }
                var result: CFTypeRef?
                return clock.measure { #expect(SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess) }
            }
        }
        #expect(read() >= .seconds(1), "Face ID looked at")
        let context = app.run { LAContext() }
        let evaluated = try await app.run { try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock") }
        #expect(evaluated)
        #expect(read([kSecUseAuthenticationContext as String: context]) < .seconds(1), "the evaluation answered it: no second prompt")
    }
}

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
