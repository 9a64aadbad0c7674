import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import KeyferryThreads
import Relay
import RelayPostgres
import SyncWire
import Testing

/// The relay's clock, moved by a test instead of waiting.
final class MovingClock: Sendable {
    private let current = Locked(Date())
    func now() -> Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

/// A circle of two authors pushing versions of a few items, as compaction sees them.
struct CompactionScript {
    let one = OneMemberCircle()
    let other = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private var links: [SigningPublicKey: BatchLink] = [:]

    /// Items by name, so the script reads as what it does.
    let items = Dictionary(uniqueKeysWithValues: ["x", "y", "z"].map { ($0, UUID()) })

    /// A batch of `author` holding `versions` (item name, milliseconds), chained after its last.
    mutating func batch(
        _ versions: [(String, UInt64)], by author: SigningKey, marker: String = "", deleting: Set<String> = [], epoch: UInt32 = 1
    ) throws -> [UInt8] {
        let keys = CircleKeys(circle: one.circle, epoch: epoch)
        let envelopes = try versions.map { name, milliseconds in
            let item = SyncedItem(
                version: HybridTimestamp(milliseconds: milliseconds), isTombstone: deleting.contains(name),
                record: ItemRecord(
                    itemClass: .genericPassword, uuid: items[name]!, accessGroup: "TEAM.group", protection: .afterFirstUnlock,
                    synchronizable: true, accessControl: nil, creationDate: Date(), modificationDate: Date(),
                    attributes: [.account: .string(name)], data: Data("\(name)-\(milliseconds)\(marker)".utf8)))
            return try SealedEnvelope.seal(item, keys: keys, author: author.publicKey)
        }
        let batch = EnvelopeBatch(envelopes, circle: one.circle, author: author, after: links[author.publicKey] ?? .start)
        links[author.publicKey] = batch.link
        return batch.bytes
    }

    /// Runs the script on `relay`, over `storage`, checking what is served after each step.
    mutating func run(_ relay: LocalRelay, _ storage: any RelayStorage) async throws {
        let (a, b) = (one.author, other.signingKey)
        let join = MembershipEntry(.join, subject: other.peer(named: "tablet"), after: one.history, signer: a)
        _ = try await relay.push(one.history.entries.map(\.bytes) + [join.bytes], circle: one.circle, stream: .membership, proof: nil)
        func push(_ body: [UInt8], by key: SigningKey) async throws {
            #expect(try await relay.push([body], circle: one.circle, stream: .envelopes, proof: one.proof([body], by: key)) == 1)
        }
        func served() async throws -> (batches: [[UInt8]], notes: [SigningPublicKey: [ClosedRange<UInt64>]]) {
            let records = try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000)
            var notes: [SigningPublicKey: [ClosedRange<UInt64>]] = [:]
            for record in records where CompactedBatches.isNote(record.body) {
                let note = try CompactedBatches(bytes: record.body)
                #expect(note.circle == one.circle)
                #expect(notes[note.author] == nil, "one note per author")
                notes[note.author] = note.sequences
            }
            let total = records.reduce(0) { $0 + $1.body.count }
            let counted = try await storage.byteCount(circle: one.circle)
            let other = try await storage.records(circle: one.circle, stream: .membership, after: 0, limit: 10).reduce(0) { $0 + $1.body.count }
            #expect(counted == total + other, "the circle's size is what it serves")
            return (records.map(\.body).filter { !CompactedBatches.isNote($0) }, notes)
        }

        var names: [[UInt8]: String] = [:]
        let a1 = try batch([("x", 1), ("y", 1)], by: a)
        names[a1] = "a1"
        try await push(a1, by: a)
        let b1 = try batch([("x", 2)], by: b)
        names[b1] = "b1"
        try await push(b1, by: b)
        #expect(try await served().batches.map { names[$0] ?? "?" } == ["a1", "b1"], "a1 still holds y's newest version")
        let a2 = try batch([("y", 2)], by: a)
        names[a2] = "a2"
        try await push(a2, by: a)
        var now = try await served()
        #expect(now.batches.map { names[$0] ?? "?" } == ["b1", "a2"], "a1 holds nothing newest and is not a's last: dropped")
        #expect(now.notes == [a.publicKey: [1...1]])
        let readerCursor = try #require(try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).last).cursor

        // A tie (another version at x's newest time) keeps both: members break it by content.
        let a3 = try batch([("x", 2)], by: a, marker: "-rival")
        names[a3] = "a3"
        try await push(a3, by: a)
        let b2 = try batch([("z", 5)], by: b)
        names[b2] = "b2"
        try await push(b2, by: b)
        let a4 = try batch([("y", 3)], by: a)
        names[a4] = "a4"
        try await push(a4, by: a)
        now = try await served()
        #expect(now.batches.map { names[$0] ?? "?" } == ["b1", "a3", "b2", "a4"])
        #expect(now.notes == [a.publicKey: [1...2]], "a's note grows, appended again")
        let later = try await storage.records(circle: one.circle, stream: .envelopes, after: readerCursor, limit: 1_000).map(\.body)
        #expect(later.contains { CompactedBatches.isNote($0) }, "a reader past the first note meets the grown one")

        // A newer x supersedes both tied versions; an author's newest batch stays, though dead.
        let b3 = try batch([("x", 9)], by: b)
        names[b3] = "b3"
        try await push(b3, by: b)
        let b4 = try batch([("z", 6)], by: b)
        names[b4] = "b4"
        try await push(b4, by: b)
        let a5 = try batch([("z", 7)], by: a)
        names[a5] = "a5"
        try await push(a5, by: a)
        now = try await served()
        #expect(now.batches.map { names[$0] ?? "?" } == ["a4", "b3", "b4", "a5"], "b4 holds nothing newest, yet is b's last")
        #expect(now.notes == [a.publicKey: [1...3], b.publicKey: [1...2]])
        // An older version pushed late is kept nowhere as newest, and drops nothing.
        let late = try batch([("x", 3)], by: a)
        names[late] = "late"
        try await push(late, by: a)
        now = try await served()
        #expect(now.batches.map { names[$0] ?? "?" } == ["a4", "b3", "b4", "a5", "late"], "a late, older version drops nothing and stays as a's last")
        #expect(now.notes == [a.publicKey: [1...3], b.publicKey: [1...2]])
    }
}

extension CompactionScript {
    /// Deletions: kept until every member acknowledged them, or until a member was away longer
    /// than the retention, which then asks it to resync; the deletion stays known.
    mutating func runDeletions(_ relay: any RelayTransport, _ storage: any RelayStorage, clock: MovingClock) async throws {
        let (a, b) = (one.author, other.signingKey)
        let join = MembershipEntry(.join, subject: other.peer(named: "tablet"), after: one.history, signer: a)
        _ = try await relay.push(one.history.entries.map(\.bytes) + [join.bytes], circle: one.circle, stream: .membership, proof: nil)
        func push(_ body: [UInt8], by key: SigningKey) async throws -> UInt64 {
            #expect(try await relay.push([body], circle: one.circle, stream: .envelopes, proof: one.proof([body], by: key)) == 1)
            return try #require(try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).last).cursor
        }
        func acknowledge(_ cursor: UInt64, by key: SigningKey) async throws {
            try await relay.acknowledge(circle: one.circle, through: cursor, proof: PushProof(acknowledging: cursor, circle: one.circle, key: key))
        }
        func held(_ body: [UInt8]) async throws -> Bool {
            try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).contains { $0.body == body }
        }

        _ = try await push(try batch([("x", 1), ("y", 1)], by: a), by: a)
        let deletion = try batch([("x", 2)], by: b, deleting: ["x"])
        let deletedAt = try await push(deletion, by: b)
        _ = try await push(try batch([("z", 1)], by: b), by: b)
        try await acknowledge(deletedAt, by: a)
        #expect(try await held(deletion), "b has not acknowledged the deletion")
        #expect(try await relay.forgottenDeletions(circle: one.circle, after: nil, limit: 10).isEmpty)

        // Only a member's signature over that cursor counts.
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()).signingKey
        let refused = await #expect(throws: RelayError.self) {
            try await relay.acknowledge(
                circle: one.circle, through: deletedAt, proof: PushProof(acknowledging: deletedAt, circle: one.circle, key: stranger))
        }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("not signed by a member"))
        await #expect(throws: RelayError.self) {
            try await relay.acknowledge(circle: one.circle, through: deletedAt + 100, proof: PushProof(acknowledging: deletedAt, circle: one.circle, key: b))
        }
        #expect(try await held(deletion))

        try await acknowledge(deletedAt, by: b)
        #expect(try await !held(deletion), "every member saw the deletion: its batch is compacted")
        #expect(
            try await relay.forgottenDeletions(circle: one.circle, after: nil, limit: 10)
                == [ForgottenDeletion(item: items["x"]!, version: HybridTimestamp(milliseconds: 2))])
        // Both saw it: neither is asked to resync.
        #expect(try await relay.pull(circle: one.circle, stream: .envelopes, after: deletedAt, limit: 10).count >= 1)

        // An older version of x arriving late is superseded by the deletion still known: a's
        // next batch lets it go.
        let late = try batch([("x", 1)], by: a, marker: "-late")
        _ = try await push(late, by: a)
        _ = try await push(try batch([("y", 2)], by: a), by: a)
        #expect(try await !held(late))

        // b goes away; a deletes y and acknowledges; past the retention, the deletion goes
        // without b, and b, reading from where it was, is asked to resync.
        let bWasAt = try #require(try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).last).cursor
        try await acknowledge(bWasAt, by: b)
        let second = try batch([("y", 3)], by: a, deleting: ["y"])
        let secondAt = try await push(second, by: a)
        _ = try await push(try batch([("z", 4)], by: a), by: a)
        try await acknowledge(secondAt + 1, by: a)
        #expect(try await held(second), "b, heard from within the retention, has not seen it")
        clock.advance(by: RelayLimits().retention + 1)
        try await acknowledge(secondAt + 1, by: a)
        #expect(try await !held(second), "b was not heard from within the retention")
        let resync = await #expect(throws: RelayError.self) {
            try await relay.pull(circle: one.circle, stream: .envelopes, after: bWasAt, limit: 10)
        }
        #expect("\(resync.map { "\($0)" } ?? "")".contains("read its envelopes again from the start"))
        if case .resyncNeeded? = resync {} else { Issue.record("not a resync: \(String(describing: resync))") }
        #expect(try await relay.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 100).count >= 1, "from the start, it reads")
        #expect(
            try await relay.forgottenDeletions(circle: one.circle, after: nil, limit: 10).map(\.item).sorted { $0.uuidString < $1.uuidString }
                == [items["x"]!, items["y"]!].sorted { $0.uuidString < $1.uuidString })
    }
}

extension CompactionScript {
    /// Key generations: an earlier one's records stay while a newest version is sealed under
    /// it, a removed member's shares go, and the current generation's always stay.
    mutating func runGenerations(_ relay: any RelayTransport, _ storage: any RelayStorage) async throws {
        let a = one.author
        var history = one.history
        let join = MembershipEntry(.join, subject: other.peer(named: "tablet"), after: history, signer: a)
        try history.append(join)
        _ = try await relay.push(history.entries.map(\.bytes), circle: one.circle, stream: .membership, proof: nil)
        func publish(_ epoch: UInt32, to recipients: [DeviceIdentity]) async throws {
            let keys = CircleKeys(circle: one.circle, epoch: epoch)
            let records =
                [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: a)).bytes]
                + recipients.map { KeyRecord.share(CircleKeyShare(keys, to: $0.sealingKey.publicKey, from: a)).bytes }
            #expect(try await relay.push(records, circle: one.circle, stream: .keys, proof: one.proof(records, .keys)) == records.count)
        }
        func held() async throws -> [(epoch: UInt32, share: Bool)] {
            try await storage.records(circle: one.circle, stream: .keys, after: 0, limit: 100).map { record in
                let key = try KeyRecord(bytes: record.body)
                if case .share = key { return (key.epoch, true) }
                return (key.epoch, false)
            }
        }
        try await publish(1, to: [one.creator, other])
        let first = try batch([("x", 1), ("y", 1)], by: a)
        _ = try await relay.push([first], circle: one.circle, stream: .envelopes, proof: one.proof([first]))

        // The tablet is removed: generation 2, shared with the creator alone.
        let remove = MembershipEntry(.remove, subject: other.peer(named: "tablet"), after: history, signer: a)
        try history.append(remove)
        _ = try await relay.push([remove.bytes], circle: one.circle, stream: .membership, proof: nil)
        try await publish(history.epoch, to: [one.creator])
        var kept = try await held()
        #expect(kept.filter { $0.epoch == 1 }.count == 2, "x and y are sealed under generation 1: its keys and the creator's share stay, the tablet's goes")
        #expect(kept.filter { $0.epoch == 2 }.count == 2)

        // Every newest version sealed under generation 2: generation 1's records go.
        let second = try batch([("x", 2), ("y", 2)], by: a, epoch: 2)
        _ = try await relay.push([second], circle: one.circle, stream: .envelopes, proof: one.proof([second]))
        let cursor = try #require(try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 10).last).cursor
        try await relay.acknowledge(circle: one.circle, through: cursor, proof: PushProof(acknowledging: cursor, circle: one.circle, key: a))
        kept = try await held()
        #expect(kept.map(\.epoch) == [2, 2], "only the current generation's keys: \(kept)")
        let records = try await storage.records(circle: one.circle, stream: .keys, after: 0, limit: 100)
        let counted = try await storage.byteCount(circle: one.circle)
        let membership = try await storage.records(circle: one.circle, stream: .membership, after: 0, limit: 100)
        let envelopes = try await storage.records(circle: one.circle, stream: .envelopes, after: 0, limit: 100)
        #expect(counted == (records + membership + envelopes).reduce(0) { $0 + $1.body.count }, "the circle's size is what it holds")
    }
}

@Suite("Relay compaction")
struct CompactionTests {
    @Test("SQLite: an earlier key generation's records go once no newest version is sealed under it; a removed member's shares go at once")
    func sqliteGenerations() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        var script = CompactionScript()
        try await script.runGenerations(LocalRelay(storage: storage), storage)
    }

    @Test(
        "PostgreSQL: the same key generations",
        .enabled(if: TestPostgres.expected, "needs the PostgreSQL server scripts/test starts"))
    func postgresGenerations() async throws {
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { storage in
            var script = CompactionScript()
            try await script.runGenerations(LocalRelay(storage: storage), storage)
        }
    }

    @Test("SQLite: a deletion leaves once every member acknowledged it, or past the retention, when a member that missed it is asked to resync")
    func sqliteDeletions() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let clock = MovingClock()
        var script = CompactionScript()
        try await script.runDeletions(LocalRelay(storage: storage, now: { clock.now() }), storage, clock: clock)
    }

    @Test("over HTTP: acknowledgements, a resync's 410 and the forgotten deletions take the relay's routes")
    func deletionsOverHTTP() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let clock = MovingClock()
        try await withRelay(storage: storage, now: { clock.now() }) { client, _ in
            var script = CompactionScript()
            try await script.runDeletions(client, storage, clock: clock)
        }
    }

    @Test("SQLite: a batch is dropped once every version in it is superseded and its author pushed after it; ties stay; each author's note says which")
    func sqlite() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        var script = CompactionScript()
        try await script.run(LocalRelay(storage: storage), storage)
    }
}

extension CompactionTests {
    @Test(
        "PostgreSQL: the same compaction, in the append's transaction",
        .enabled(if: TestPostgres.expected, "needs the PostgreSQL server scripts/test starts"))
    func postgres() async throws {
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { storage in
            var script = CompactionScript()
            try await script.run(LocalRelay(storage: storage), storage)
        }
    }

    @Test(
        "PostgreSQL: the same deletions, acknowledgements and resync",
        .enabled(if: TestPostgres.expected, "needs the PostgreSQL server scripts/test starts"))
    func postgresDeletions() async throws {
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { storage in
            let clock = MovingClock()
            var script = CompactionScript()
            try await script.runDeletions(LocalRelay(storage: storage, now: { clock.now() }), storage, clock: clock)
        }
    }
}
