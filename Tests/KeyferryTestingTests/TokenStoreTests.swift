import Foundation
import KeyferryTesting
import Testing

/// The README's example: the two expectations it marks as failing do fail, for the reasons it gives.
@Suite("the README's TokenStore")
struct TokenStoreTests {
    @Test("a WhenUnlocked token is unreadable once the phone locks, and the add is a trap")
    func readmeExample() async throws {
        let phone = try SimulatedDevice(passcode: "123456")
        let app = try phone.install("com.example.notes")
        app.run { #expect(TokenStore().save("t0k3n") == errSecSuccess) }
        try phone.lock()
        app.run { #expect(TokenStore().read() == nil) }
        #expect(app.lastFailure?.contains("-25308") == true || app.lastFailure?.contains("locked") == true, "\(app.lastFailure ?? "")")
        let traps = try #require(throws: TrapsFound.self) { try phone.requireNoTraps() }
        #expect(traps.description.contains("KeyferryTestingTests/TokenStore.swift:14: no accessibility on add"))
    }
}
