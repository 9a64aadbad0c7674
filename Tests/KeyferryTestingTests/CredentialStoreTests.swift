import Foundation
import KeyferryTesting
import Testing

/// App code written for Apple's platforms (Samples/CredentialStore.swift), run on a simulated
/// device: the behaviour the seeds describe, traps included.
@Suite("a type-safe wrapper on a simulated device")
struct CredentialStoreTests {
    let phone: SimulatedDevice
    let context: KeyferryContext
    let store = CredentialStore(service: "com.example.app.auth")

    init() throws {
        phone = try SimulatedDevice(biometry: true)
        context = try phone.install("com.example.app")
    }

    struct Session: Codable, Equatable {
        var user: String
        var token: String
    }

    @Test("add-or-update, Codable values, listing and deleting")
    func roundTrip() throws {
        try context.run {
            try store.save(Data("one".utf8), account: "alice")
            try store.save(Data("two".utf8), account: "alice")
            #expect(try store.read(account: "alice") == Data("two".utf8))
            try store.save(Session(user: "bob", token: "t"), account: "bob")
            #expect(try store.read(Session.self, account: "bob") == Session(user: "bob", token: "t"))
            #expect(try store.accounts() == ["alice", "bob"])
            try store.delete(account: "alice")
            #expect(throws: CredentialStoreError.notFound) { try store.read(account: "alice") }
            try store.delete(account: "alice")
        }
        try phone.requireNoTraps()
    }

    @Test("a locked device: afterFirstUnlock items read, whenUnlocked ones fail -25308")
    func lockedDevice() throws {
        try context.run {
            try store.save(Data("bg".utf8), account: "background")
            try store.save(Data("fg".utf8), account: "foreground", accessibility: kSecAttrAccessibleWhenUnlocked)
            try phone.lock()
            #expect(try store.read(account: "background") == Data("bg".utf8))
            #expect(throws: CredentialStoreError.unhandled(errSecInteractionNotAllowed)) { try store.read(account: "foreground") }
        }
        #expect(context.lastFailure?.contains("locked") == true, "\(context.lastFailure ?? "")")
    }

    @Test("a biometric item: the user's answer decides; a new enrollment locks it and changes the domain state")
    func biometric() throws {
        try context.run {
            try store.saveBiometric(Data("vault".utf8), account: "vault")
            #expect(try store.readBiometric(account: "vault", context: LAContext()) == Data("vault".utf8))

            context.userWill(.cancel)
            #expect(throws: CredentialStoreError.unhandled(errSecUserCanceled)) { try store.readBiometric(account: "vault", context: LAContext()) }
            let quiet = LAContext()
            quiet.interactionNotAllowed = true
            #expect(throws: CredentialStoreError.unhandled(errSecInteractionNotAllowed)) { try store.readBiometric(account: "vault", context: quiet) }

            let probe = LAContext()
            var error: NSError?
            #expect(probe.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error))
            let saved = probe.evaluatedPolicyDomainState
            #expect(saved != nil && !CredentialStore.biometryChanged(since: saved))
            try phone.changeBiometryEnrollment()
            #expect(CredentialStore.biometryChanged(since: saved))
            #expect(throws: CredentialStoreError.unhandled(errSecAuthFailed)) { try store.readBiometric(account: "vault", context: LAContext()) }
        }
    }

    @Test("an evaluated LAContext answers the item's prompt; evaluation follows the simulated user")
    func evaluatedContext() async throws {
        try await context.run {
            try store.saveBiometric(Data("vault".utf8), account: "vault")
            let context = LAContext()
            #expect(try await context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock"))
            // The evaluation is reused: the queued cancel waits for the next prompt.
            self.context.userWill(.cancel)
            #expect(try store.readBiometric(account: "vault", context: context) == Data("vault".utf8))
            await #expect(throws: LAError(.userCancel)) {
                try await LAContext().evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
            }

            self.context.userWill(.biometryNoMatch)
            await #expect(throws: LAError(.authenticationFailed)) {
                try await LAContext().evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Unlock")
            }
            self.context.userWill(.passcode)
            #expect(try await LAContext().evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock"))
        }
    }

    @Test("without a context, calls fail with errSecNotAvailable and say why once")
    func noContext() {
        var result: CFTypeRef?
        #expect(SecItemCopyMatching([kSecClass: kSecClassGenericPassword] as CFDictionary, &result) == errSecNotAvailable)
        #expect(SecCopyErrorMessageString(errSecNotAvailable, nil) == "No keychain is available.")
        #expect(SecCopyErrorMessageString(-1, nil) == "OSStatus -1")
    }
}
