import Foundation
import KeychainModel
import NodeControl
import SyncWire
import Testing

@testable import keyferry

/// The command line's remedies are chosen by an error's code, never by its sentence: a
/// message reworded keeps its remedy, and a message that happens to match gets none.
@Suite("remedies, by code")
struct RemedyTests {
    @Test("a prompt the item needs: the --auth options, by the error's reason, even across the wire")
    func userAuthentication() throws {
        let needed = KeychainError(.interactionNotAllowed, "worded in any way", reason: .userAuthenticationNeeded)
        #expect(Remedy.remedy(for: needed)?.contains("--auth match") == true)
        let plain = KeychainError(.interactionNotAllowed, "the item needs user authentication, says the sentence")
        #expect(Remedy.remedy(for: plain) == nil, "a sentence that matches is no reason")

        // As a node sends it and a client rebuilds it.
        let sent = try NodeAPI.encoder.encode(NodeAPI.Failure(needed))
        let received = try #require(try NodeAPI.decoder.decode(NodeAPI.Failure.self, from: sent).error as? KeychainError)
        #expect(received == needed && received.reason == .userAuthenticationNeeded)
        #expect(Remedy.remedy(for: received)?.contains("--auth match") == true)

        // The evaluation of access control gives the reason itself.
        let control = try AccessControl(protection: .whenPasscodeSetThisDeviceOnly, flags: [.userPresence])
        let facts = AuthenticationFacts(biometryEnrolled: false, biometryUnchangedSinceItemWasAdded: true) { _ in false }
        let refusal = try #require(control.evaluate(AuthenticationContext(interactionAllowed: false), facts: facts))
        #expect(refusal.reason == .userAuthenticationNeeded)
    }

    @Test("a relay's TLS is its own code; a relay merely unreachable whose words mention TLS is not it")
    func tls() {
        #expect(RelayError.tlsFailed("certificate").code == .tlsFailed)
        #expect(RelayError.tlsFailed("certificate").kind == .unavailable, "exit 6, as before")
        #expect(Remedy.remedy(for: RelayError.unreachable("TLS failed (somewhere)")) == nil)
    }
}
