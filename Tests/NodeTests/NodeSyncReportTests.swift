import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import Logging
import NodeControl
import Relay
import RelayHTTP
import SyncWire
import Testing

@testable import Node
@testable import Sync

@Suite("what sync now reports")
struct NodeSyncReportTests {
    @Test("sync now reports what the node's own passes refused since the last report, by name, once")
    func refusalsOfEveryPass() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-node-sync-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let logger = Logger(label: "keyferry.test") { _ in SwiftLogNoOpLogHandler() }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = Task {
            try await RelayServer.run(storage: storage, host: "127.0.0.1", port: 0, logger: logger) { continuation.yield($0) }
        }
        defer { server.cancel() }
        var iterator = ports.makeAsyncIterator()
        let relay = "http://127.0.0.1:\(try #require(await iterator.next()))"

        let (phone, tablet) = (try TestDevice(seed: 1), try TestDevice(seed: 2))
        let clock = TestClock()
        let phoneSync = await NodeSync(device: phone.device, logger: logger, clock: clock)
        let tabletSync = await NodeSync(device: tablet.device, logger: logger)
        let circle = try #require(try await phoneSync.create(NodeAPI.CircleCreate(relay: relay, name: "phone")).circle)
        let voucher = try await phoneSync.vouch(NodeAPI.Vouch(peer: try await tabletSync.identity()))
        _ = try await tabletSync.join(voucher)

        // The tablet, a member, pushes a batch whose signature it broke: the relay leaves batch
        // signatures to the members, and the phone refuses it.
        let identity = try SyncSecrets.identity(of: tablet.device)
        let record = ItemRecord(
            itemClass: .genericPassword, uuid: UUID(), accessGroup: "\(TestDevice.teamID).\(TestDevice.appID)", protection: .afterFirstUnlock,
            synchronizable: true, accessControl: nil, creationDate: Date(), modificationDate: Date(), attributes: [.account: .string("x")],
            data: Data("x".utf8))
        let envelope = try SealedEnvelope.seal(
            SyncedItem(version: HybridTimestamp(milliseconds: 1, counter: 0), isTombstone: false, record: record),
            keys: CircleKeys(circle: circle, epoch: 1), author: identity.signingKey.publicKey)
        var batch = EnvelopeBatch([envelope], circle: circle, author: identity.signingKey).bytes
        batch[batch.count - 1] ^= 1
        _ = try await RelayClient(url: URL(string: relay)!).push(
            [batch], circle: circle, stream: .envelopes, proof: PushProof(signing: [batch], circle: circle, stream: .envelopes, key: identity.signingKey))

        // The phone's own loop meets it first.
        let loop = Task { await phoneSync.run() }
        defer { loop.cancel() }
        while (try await phoneSync.syncStatus().lastReport?.rejectedCount ?? 0) == 0 {
            while clock.sleeping == 0 { await Task.yield() }
            clock.advance(by: .seconds(1))
        }
        loop.cancel()
        let report = try await phoneSync.syncNow()
        #expect(report.rejected.map(\.reason) == [.forged], "\(report.rejected)")
        #expect(try await phoneSync.syncNow().rejectedCount == 0, "reported once")
        withExtendedLifetime((phone, tablet)) {}
    }
}
