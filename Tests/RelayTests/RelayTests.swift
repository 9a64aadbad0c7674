import Foundation
import KeychainModel
import KeyferryCrypto
import Logging
import Relay
import Sync
import Testing

/// A relay served in this process on a free loopback port, stopped when `body` returns.
private func withRelay<T>(storage: any RelayStorage, port: Int = 0, _ body: (RelayClient, Int) async throws -> T) async throws -> T {
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    let server = Task {
        try await RelayServer.run(storage: storage, host: "127.0.0.1", port: port, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }) {
            continuation.yield($0)
        }
    }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    let bound = try #require(await iterator.next())
    let result = try await body(RelayClient(url: URL(string: "http://127.0.0.1:\(bound)")!), bound)
    server.cancel()
    _ = await server.result
    return result
}

private func temporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-relay-\(UUID().uuidString)")
}

/// `count` batches of one envelope each, of items whose attributes and secrets carry marker
/// strings.
private func batches(_ count: Int, circle: UUID, author: SigningKey) throws -> [[UInt8]] {
    let keys = CircleKeys(circle: circle, epoch: 1)
    return try (0..<count).map { i in
        let item = SyncedItem(version: HybridTimestamp(milliseconds: UInt64(1_000 + i)), isTombstone: false,
                              record: ItemRecord(itemClass: .genericPassword, uuid: UUID(), accessGroup: "MARKER-GROUP", protection: .afterFirstUnlock,
                                                 synchronizable: true, accessControl: nil, creationDate: Date(), modificationDate: Date(),
                                                 attributes: [.account: .string("MARKER-ACCOUNT-\(i)")], data: Data("MARKER-SECRET-\(i)".utf8)))
        return EnvelopeBatch([try SealedEnvelope.seal(item, keys: keys, author: author.publicKey)], circle: circle, author: author).bytes
    }
}

@Suite("Relay")
struct RelayTests {
    private let author = SigningKey(seed: SymmetricKey())

    @Test("storage keeps each circle's streams apart, in push order, each record once, across a reopen")
    func storage() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = (UUID(), UUID())
        let storage = try SQLiteRelayStorage(directory: directory)
        #expect(try storage.append([[1], [2], [3]], circle: a, stream: .envelopes) == 3)
        #expect(try storage.append([[2], [4]], circle: a, stream: .envelopes) == 1, "a retried record is not stored twice")
        #expect(try storage.append([[1]], circle: b, stream: .envelopes) == 1)
        #expect(try storage.append([[1]], circle: a, stream: .membership) == 1)

        let reopened = try SQLiteRelayStorage(directory: directory)
        let all = try reopened.records(circle: a, stream: .envelopes, after: 0, limit: 100)
        #expect(all.map(\.body) == [[1], [2], [3], [4]])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.cursor < $1.cursor })
        #expect(try reopened.records(circle: a, stream: .envelopes, after: all[1].cursor, limit: 1).map(\.body) == [[3]])
        #expect(try reopened.records(circle: b, stream: .envelopes, after: 0, limit: 100).map(\.body) == [[1]])
        #expect(try reopened.records(circle: b, stream: .keys, after: 0, limit: 100).isEmpty)
    }

    @Test("pushes come back by cursor; foreign and malformed records, and forged membership entries, are refused and nothing of their push is kept")
    func pushAndPull() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let circle = UUID()
        let sealed = try batches(5, circle: circle, author: author)
        try await withRelay(storage: storage) { client, port in
            #expect(try await client.push(Array(sealed.prefix(3)), circle: circle, stream: .envelopes) == 3)
            #expect(try await client.push(sealed, circle: circle, stream: .envelopes) == 2)
            let first = try await client.pull(circle: circle, stream: .envelopes, after: 0, limit: 2)
            #expect(first.map(\.body) == Array(sealed.prefix(2)))
            let rest = try await client.pull(circle: circle, stream: .envelopes, after: first.last!.cursor)
            #expect(rest.map(\.body) == Array(sealed.dropFirst(2)))

            let foreign = try batches(1, circle: UUID(), author: author)[0]
            for (bad, why) in [(foreign, "a batch of envelopes is for another circle"), ([1, 2, 3], "a record is not a batch of envelopes"),
                               (Array(sealed[0].dropLast()), "a record is not a batch of envelopes")] {
                let error = await #expect(throws: RelayError.self) {
                    try await client.push([try batches(1, circle: circle, author: author)[0], bad], circle: circle, stream: .envelopes)
                }
                #expect(error == .refused("422 Unprocessable Entity from http://127.0.0.1:\(port): \(why)"))
            }
            let history = CircleHistory(creating: circle, creator: DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()), name: "phone")
            var forged = history.entries[0].bytes
            forged[forged.count - 10] ^= 1
            await #expect(throws: RelayError.self) { try await client.push([forged], circle: circle, stream: .membership) }
            #expect(try await client.push(history.entries.map(\.bytes), circle: circle, stream: .membership) == 1)
            await #expect(throws: RelayError.self) { try await client.push(sealed, circle: circle, stream: .membership) }
        }
        #expect(try storage.records(circle: circle, stream: .envelopes, after: 0, limit: 100).count == 5)
    }

    @Test("the relay's files hold none of the items' attributes, groups or secrets")
    func opaqueFiles() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let circle = UUID()
        let storage = try SQLiteRelayStorage(directory: directory)
        try await withRelay(storage: storage) { client, _ in
            try await client.push(try batches(50, circle: circle, author: author), circle: circle, stream: .envelopes)
        }
        // Read while the database is open, so its write-ahead log is there too (closing it
        // checkpoints and removes the log).
        try withExtendedLifetime(storage) {
            let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            #expect(files.contains { $0.lastPathComponent == "relay.sqlite-wal" })
            for file in files {
                let bytes = [UInt8](try Data(contentsOf: file))
                for marker in ["MARKER-GROUP", "MARKER-ACCOUNT", "MARKER-SECRET"] {
                    #expect(bytes.firstRange(of: Array(marker.utf8)) == nil, "\(marker) in \(file.lastPathComponent)")
                }
            }
        }
    }

    @Test("a client retries with backoff until the relay is up, loses nothing, and gives up at its deadline")
    func retries() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let circle = UUID()
        let sealed = try batches(3, circle: circle, author: author)
        // A port that was free a moment ago, with nothing listening on it now.
        let port = try await withRelay(storage: storage) { _, port in port }
        let client = RelayClient(url: URL(string: "http://127.0.0.1:\(port)")!)

        let down = await #expect(throws: RelayError.self) {
            try await client.retrying(until: .now + .milliseconds(300)) { try await $0.push(sealed, circle: circle, stream: .envelopes) }
        }
        #expect(down == .unreachable("http://127.0.0.1:\(port): nothing is listening there (is `keyferry relay serve` running?)"))
        let pushing = Task { try await client.retrying(until: .now + .seconds(30)) { try await $0.push(sealed, circle: circle, stream: .envelopes) } }
        try await Task.sleep(for: .milliseconds(400))
        let pushed = try await withRelay(storage: storage, port: port) { _, _ in try await pushing.value }
        #expect(pushed == 3)
        #expect(try storage.records(circle: circle, stream: .envelopes, after: 0, limit: 10).map(\.body) == sealed)
    }
}
