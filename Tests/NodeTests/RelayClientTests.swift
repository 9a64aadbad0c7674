import Foundation
import Hummingbird
import HummingbirdTesting
import KeychainModel
import RelayHTTP
import SyncWire
import Synchronization
import Testing

@Suite("Relay client")
struct RelayClientTests {
    /// Requests that reached the address a redirect named.
    final class Hits: Sendable { let count = Atomic<Int>(0) }

    @Test("a relay that answers 307 is refused, not followed: the signed push goes nowhere else")
    func redirectsNotFollowed() async throws {
        let hits = Hits()
        let router = Router()
        router.post("elsewhere/**") { _, _ -> HTTPResponse.Status in
            hits.count.add(1, ordering: .relaxed)
            return .ok
        }
        router.post("**") { _, _ in Response(status: .temporaryRedirect, headers: [.location: "/elsewhere/push"]) }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let port = try #require(client.port)
            let relay = RelayClient(url: URL(string: "http://127.0.0.1:\(port)")!)
            let refusal = await #expect(throws: RelayError.self) {
                _ = try await relay.push([[1, 2, 3]], circle: UUID(), stream: .envelopes, proof: nil)
            }
            #expect(refusal.map { "\($0)" }?.contains("307") == true, "\(String(describing: refusal))")
        }
        #expect(hits.count.load(ordering: .relaxed) == 0, "the redirect was followed")
    }
}
