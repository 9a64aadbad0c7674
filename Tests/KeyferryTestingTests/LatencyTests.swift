import Foundation
import KeychainModel
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
