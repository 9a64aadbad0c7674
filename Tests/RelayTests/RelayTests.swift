import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import Logging
import Relay
import RelayHTTP
import SyncWire
import Testing

/// A relay served in this process on a free loopback port, stopped when `body` returns.
func withRelay<T>(
    storage: any RelayStorage, admission: RelayAdmission = .open, port: Int = 0, now: @escaping @Sendable () -> Date = Date.init,
    _ body: (RelayClient, Int) async throws -> T
) async throws -> T {
    let (ports, continuation) = AsyncStream<Int>.makeStream()
    let server = Task {
        try await RelayServer.run(
            storage: storage, admission: admission, host: "127.0.0.1", port: port, now: now,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        ) { continuation.yield($0) }
    }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    let bound = try #require(await iterator.next())
    let result = try await body(RelayClient(url: URL(string: "http://127.0.0.1:\(bound)")!), bound)
    server.cancel()
    _ = await server.result
    return result
}

func temporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-relay-\(UUID().uuidString)")
}

@Suite("Relay")
struct RelayTests {
    @Test("storage keeps each circle's streams apart, in push order, each record once, across a reopen")
    func storage() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (a, b) = (UUID(), UUID())
        let storage = try SQLiteRelayStorage(directory: directory)
        #expect(try await storage.append([[1], [2], [3]], circle: a, stream: .envelopes) == 3)
        #expect(try await storage.append([[2], [4]], circle: a, stream: .envelopes) == 1, "a retried record is not stored twice")
        #expect(try await storage.append([[1]], circle: b, stream: .envelopes) == 1)
        #expect(try await storage.append([[1]], circle: a, stream: .membership) == 1)

        let reopened = try SQLiteRelayStorage(directory: directory)
        let all = try await reopened.records(circle: a, stream: .envelopes, after: 0, limit: 100)
        #expect(all.map(\.body) == [[1], [2], [3], [4]])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.cursor < $1.cursor })
        #expect(try await reopened.records(circle: a, stream: .envelopes, after: all[1].cursor, limit: 1).map(\.body) == [[3]])
        #expect(try await reopened.records(circle: b, stream: .envelopes, after: 0, limit: 100).map(\.body) == [[1]])
        #expect(try await reopened.records(circle: b, stream: .keys, after: 0, limit: 100).isEmpty)
    }

    @Test("pushes come back by cursor; foreign and malformed records, and forged membership entries, are refused and nothing of their push is kept")
    func pushAndPull() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let one = OneMemberCircle()
        let circle = one.circle
        let sealed = try one.batches(5)
        try await withRelay(storage: storage) { client, port in
            try await one.create(on: client)
            let firstThree = Array(sealed.prefix(3))
            #expect(try await client.push(firstThree, circle: circle, stream: .envelopes, proof: one.proof(firstThree)) == 3)
            #expect(try await client.push(sealed, circle: circle, stream: .envelopes, proof: one.proof(sealed)) == 2)
            let first = try await client.pull(circle: circle, stream: .envelopes, after: 0, limit: 2)
            #expect(first.map(\.body) == Array(sealed.prefix(2)))
            let rest = try await client.pull(circle: circle, stream: .envelopes, after: first.last!.cursor)
            #expect(rest.map(\.body) == Array(sealed.dropFirst(2)))

            let foreign = try OneMemberCircle().batches(1, by: one.author)[0]
            let from = "from http://127.0.0.1:\(port)"
            for (bad, why) in [
                (foreign, "403 Forbidden \(from): a batch of envelopes for another circle, or by another author than the pusher"),
                ([1, 2, 3], "422 Unprocessable Entity \(from): a record is not a batch of envelopes"),
                (Array(sealed[0].dropLast()), "422 Unprocessable Entity \(from): a record is not a batch of envelopes"),
            ] {
                let push = [try one.batches(1)[0], bad]
                let error = await #expect(throws: RelayError.self) {
                    try await client.push(push, circle: circle, stream: .envelopes, proof: one.proof(push))
                }
                #expect(error == .refused(why))
            }
            var forged = one.history.entries[0].bytes
            forged[forged.count - 10] ^= 1
            await #expect(throws: RelayError.self) { try await client.push([forged], circle: circle, stream: .membership, proof: nil) }
            #expect(try await client.push(one.history.entries.map(\.bytes), circle: circle, stream: .membership, proof: nil) == 0)
            await #expect(throws: RelayError.self) { try await client.push(sealed, circle: circle, stream: .membership, proof: nil) }
        }
        #expect(try await storage.records(circle: circle, stream: .envelopes, after: 0, limit: 100).count == 5)
        #expect(try await storage.records(circle: circle, stream: .membership, after: 0, limit: 100).count == 1)
    }

    @Test("the relay keeps only what a member could have written: unsigned, a stranger's, a removed member's, out of place or over quota is refused")
    func onlyMembersWrite() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let one = OneMemberCircle()
        let circle = one.circle
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let relay = LocalRelay(storage: storage, limits: RelayLimits(circleBytes: 64 << 10))
        let early = try one.batches(1)
        #expect(
            await refusal { try await relay.push(early, circle: circle, stream: .envelopes, proof: one.proof(early)) }?
                .contains("there is no circle") == true, "nothing is kept for a circle the relay does not know")
        _ = try await relay.push(one.history.entries.map(\.bytes), circle: circle, stream: .membership, proof: nil)
        let batch = try one.batches(1)
        #expect(await refusal { try await relay.push(batch, circle: circle, stream: .envelopes, proof: nil) }?.contains("signed by a member") == true)
        let strangers = try one.batches(1, by: stranger.signingKey)
        #expect(
            await refusal {
                try await relay.push(strangers, circle: circle, stream: .envelopes, proof: one.proof(strangers, by: stranger.signingKey))
            }?.contains("not signed by a member") == true)
        #expect(
            await refusal { try await relay.push(batch, circle: circle, stream: .envelopes, proof: one.proof(strangers)) } != nil,
            "a signature over other records proves nothing")
        // A stranger's membership entry: made by a non-member.
        var history = one.history
        let strangerJoin = MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: stranger.signingKey)
        #expect(
            await refusal { try await relay.push([strangerJoin.bytes], circle: circle, stream: .membership, proof: nil) }?
                .contains("sponsor is not a member") == true)
        // A key record not signed by the generation's author.
        let planted = CircleKeys(circle: circle, epoch: 1)
        let plantedRecord = [KeyRecord.classKeys(PublishedClassKeys(planted, wrapped: planted.wrappedClassKeys(), signer: stranger.signingKey)).bytes]
        #expect(
            await refusal { try await relay.push(plantedRecord, circle: circle, stream: .keys, proof: one.proof(plantedRecord, .keys)) }?
                .contains("not signed by the member who made it") == true)
        let keys = [KeyRecord.classKeys(PublishedClassKeys(planted, wrapped: planted.wrappedClassKeys(), signer: one.author)).bytes]
        #expect(try await relay.push(keys, circle: circle, stream: .keys, proof: one.proof(keys, .keys)) == 1)
        // A member vouches for the stranger, then removes it: it writes no more.
        let join = MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: one.author)
        try history.append(join)
        let remove = MembershipEntry(.remove, subject: stranger.peer(named: "x"), after: history, signer: one.author)
        _ = try await relay.push([join.bytes, remove.bytes], circle: circle, stream: .membership, proof: nil)
        let late = try one.batches(1, by: stranger.signingKey)
        #expect(await refusal { try await relay.push(late, circle: circle, stream: .envelopes, proof: one.proof(late, by: stranger.signingKey)) } != nil)
        // The quota: 64 KiB of records, then refusals naming it.
        var full: String?
        for _ in 0..<1_000 where full == nil {
            let more = try one.batches(1)
            full = await refusal { try await relay.push(more, circle: circle, stream: .envelopes, proof: one.proof(more)) }
        }
        #expect(full?.contains("may hold 65536") == true, "\(full ?? "never refused")")
        #expect(try await storage.byteCount(circle: circle) <= 64 << 10)
        #expect(try await storage.records(circle: circle, stream: .membership, after: 0, limit: 100).count == 3)
        #expect(try await storage.records(circle: circle, stream: .keys, after: 0, limit: 100).count == 1)
    }

    /// Pushes, turning a refusal into its sentence.
    func refusal(_ push: () async throws -> Int) async -> String? {
        do {
            _ = try await push()
            return nil
        } catch { return "\(error)" }
    }

    @Test("a circle full of envelopes still changes its membership: a member is removed, another joins, the new keys are kept")
    func fullCircleChangesMembership() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let one = OneMemberCircle()
        let relay = LocalRelay(storage: storage, limits: RelayLimits(circleBytes: 16 << 10))
        var history = one.history
        let insider = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let join = MembershipEntry(.join, subject: insider.peer(named: "insider"), after: history, signer: one.author)
        try history.append(join)
        _ = try await relay.push(history.entries.map(\.bytes), circle: one.circle, stream: .membership, proof: nil)
        // The insider fills the circle.
        var full: String?
        for _ in 0..<1_000 where full == nil {
            let more = try one.batches(1, by: insider.signingKey)
            full = await refusal { try await relay.push(more, circle: one.circle, stream: .envelopes, proof: one.proof(more, by: insider.signingKey)) }
        }
        #expect(full?.contains("may hold 16384") == true, "\(full ?? "never refused")")
        // The owner removes it, a new device joins, and the new generation's keys are kept.
        let remove = MembershipEntry(.remove, subject: insider.peer(named: "insider"), after: history, signer: one.author)
        try history.append(remove)
        let newcomer = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let welcome = MembershipEntry(.join, subject: newcomer.peer(named: "tablet"), after: history, signer: one.author)
        try history.append(welcome)
        #expect(try await relay.push([remove.bytes, welcome.bytes], circle: one.circle, stream: .membership, proof: nil) == 2)
        let keys = CircleKeys(circle: one.circle, epoch: history.epoch)
        let records = [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: one.author)).bytes]
        #expect(try await relay.push(records, circle: one.circle, stream: .keys, proof: one.proof(records, .keys)) == 1)
        let more = try one.batches(1)
        #expect(await refusal { try await relay.push(more, circle: one.circle, stream: .envelopes, proof: one.proof(more)) }?.contains("may hold") == true)
    }

    @Test("a circle's author pushing key records without end stops at its quota and reserve; the other circles keep syncing")
    func keysStreamBounded() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let (quota, reserve) = (16 << 10, 8 << 10)
        let relay = LocalRelay(storage: storage, limits: RelayLimits(circleBytes: quota, reserveBytes: reserve))
        let flooder = OneMemberCircle()
        let honest = OneMemberCircle()
        try await flooder.create(on: relay)
        try await honest.create(on: relay)
        var full: String?
        for _ in 0..<1_000 where full == nil {
            // Fresh keys each time: a new record, signed by the generation's author as it must be.
            let keys = CircleKeys(circle: flooder.circle, epoch: flooder.history.epoch)
            let records = [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: flooder.author)).bytes]
            full = await refusal { try await relay.push(records, circle: flooder.circle, stream: .keys, proof: flooder.proof(records, .keys)) }
        }
        #expect(full?.contains("its reserve included") == true, "\(full ?? "never refused")")
        #expect(try await storage.byteCount(circle: flooder.circle) <= quota + reserve)
        let batch = try honest.batches(1)
        #expect(try await relay.push(batch, circle: honest.circle, stream: .envelopes, proof: honest.proof(batch)) == 1)
    }

    @Test(
        "with token admission only a token's holder creates a circle (the token travelling in the push's header); circles made before keep syncing and admitting members without one"
    )
    func tokenAdmission() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let earlier = OneMemberCircle()
        try await withRelay(storage: storage) { client, _ in try await earlier.create(on: client) }

        let tokens = directory.appendingPathComponent("tokens")
        try "# for the mobile team\nfirst-token-0123456789\n\n  second-token-0123456789  \n".write(to: tokens, atomically: true, encoding: .utf8)
        try await withRelay(storage: storage, admission: try RelayAdmission(tokenFile: tokens)) { client, _ in
            let stranger = OneMemberCircle()
            let none = await refusal {
                try await stranger.create(on: client)
                return 1
            }
            #expect(none?.contains("403") == true && none?.contains("carries none") == true, "\(none ?? "created")")
            var wrong = client
            wrong.admissionToken = "first-token-0123456780"
            let guessed = await refusal {
                try await stranger.create(on: wrong)
                return 1
            }
            #expect(guessed?.contains("is not one this relay holds") == true, "\(guessed ?? "created")")
            #expect(try await storage.byteCount(circle: stranger.circle) == 0, "nothing of a refused creation is kept")

            var invited = client
            invited.admissionToken = "second-token-0123456789"
            let member = OneMemberCircle()
            try await member.create(on: invited)
            #expect(try await client.pull(circle: member.circle, stream: .membership, after: 0).count == member.history.entries.count)

            // The circle made before the setting: keys, envelopes and a new member, with no token.
            let keys = CircleKeys(circle: earlier.circle, epoch: earlier.history.epoch)
            let records = [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: earlier.author)).bytes]
            #expect(try await client.push(records, circle: earlier.circle, stream: .keys, proof: earlier.proof(records, .keys)) == 1)
            let batch = try earlier.batches(1)
            #expect(try await client.push(batch, circle: earlier.circle, stream: .envelopes, proof: earlier.proof(batch)) == 1)
            let newcomer = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
            let join = MembershipEntry(.join, subject: newcomer.peer(named: "tablet"), after: earlier.history, signer: earlier.author)
            #expect(try await client.push([join.bytes], circle: earlier.circle, stream: .membership, proof: nil) == 1)
        }
    }

    @Test("a token file with a short token or no token, or none at all, is refused, naming the line")
    func tokenFiles() throws {
        let directory = temporaryDirectory()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tokens")
        for (text, problem) in [("long-enough-token-1\nshort\n", "line 2 has 5 characters"), ("# only a comment\n\n", "holds no token")] {
            try text.write(to: file, atomically: true, encoding: .utf8)
            let error = #expect(throws: RelayAdmission.TokenFileProblem.self) { try RelayAdmission(tokenFile: file) }
            #expect(error?.reason.contains(problem) == true, "\(error.map { "\($0)" } ?? "")")
            #expect(error?.missing == false)
        }
        let absent = #expect(throws: RelayAdmission.TokenFileProblem.self) { try RelayAdmission(tokenFile: directory.appendingPathComponent("none")) }
        #expect(absent?.missing == true)
    }

    @Test("a relay creates at most its number of circles and holds at most its total bytes, whoever asks")
    func relayWideLimits() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let relay = LocalRelay(storage: storage, limits: RelayLimits(circleBytes: 1 << 20, totalBytes: 24 << 10, circles: 2))
        let circles = [OneMemberCircle(), OneMemberCircle(), OneMemberCircle()]
        try await circles[0].create(on: relay)
        try await circles[1].create(on: relay)
        let third = circles[2]
        let entries = third.history.entries.map(\.bytes)
        let refused = await refusal { try await relay.push(entries, circle: third.circle, stream: .membership, proof: nil) }
        #expect(refused?.contains("holds 2 circles, its most") == true, "\(refused ?? "kept")")
        var full: String?
        for index in 0..<1_000 where full == nil {
            let one = circles[index % 2]
            let more = try one.batches(1)
            full = await refusal { try await relay.push(more, circle: one.circle, stream: .envelopes, proof: one.proof(more)) }
        }
        #expect(full?.contains("this relay holds") == true && full?.contains("may hold 24576") == true, "\(full ?? "never refused")")
        let held = try await storage.byteCount(circle: circles[0].circle) + storage.byteCount(circle: circles[1].circle)
        #expect(held <= 24 << 10)
    }

    @Test("concurrent pushes never take a circle past its quota: the check is part of the append")
    func quotaUnderConcurrency() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let one = OneMemberCircle()
        let quota = 8 << 10
        let relay = LocalRelay(storage: storage, limits: RelayLimits(circleBytes: quota))
        try await one.create(on: relay)
        let pushes = try (0..<24).map { _ in try one.batches(4) }
        let refused = await withTaskGroup(of: Bool.self) { group in
            for batch in pushes {
                group.addTask { (try? await relay.push(batch, circle: one.circle, stream: .envelopes, proof: one.proof(batch))) == nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(refused > 0, "the pushes were meant to overflow the quota")
        #expect(try await storage.byteCount(circle: one.circle) <= quota)
    }

    @Test("the relay holds a bounded number of circles' memberships in memory; one it let go is read again when pushed to")
    func boundedCache() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keeper = RelayKeeper(storage: try SQLiteRelayStorage(directory: directory), cachedCircles: 4)
        let circles = (0..<12).map { _ in OneMemberCircle() }
        for one in circles {
            _ = try await keeper.push(one.history.entries.map(\.bytes), circle: one.circle, stream: .membership, proof: nil)
        }
        #expect(await keeper.cachedCircleCount == 4)
        let first = circles[0]
        let batch = try first.batches(1)
        #expect(try await keeper.push(batch, circle: first.circle, stream: .envelopes, proof: first.proof(batch)) == 1)
        #expect(await keeper.cachedCircleCount == 4)
    }

    @Test("membership entries with long names are refused by the relay; members refuse to make them")
    func boundedNames() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let relay = LocalRelay(storage: try SQLiteRelayStorage(directory: directory))
        let one = OneMemberCircle()
        try await one.create(on: relay)
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let long = MembershipEntry(.join, subject: stranger.peer(named: String(repeating: "n", count: 65)), after: one.history, signer: one.author)
        #expect(await refusal { try await relay.push([long.bytes], circle: one.circle, stream: .membership, proof: nil) }?.contains("64 bytes") == true)
        #expect(throws: CircleError.self) { try PeerIdentity.check(name: String(repeating: "n", count: 65)) }
        #expect(throws: CircleError.self) { try PeerIdentity.check(name: "") }
        try PeerIdentity.check(name: String(repeating: "n", count: 64))
    }

    @Test("the relay's files hold none of the items' attributes, groups or secrets")
    func opaqueFiles() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let one = OneMemberCircle()
        let storage = try SQLiteRelayStorage(directory: directory)
        try await withRelay(storage: storage) { client, _ in
            try await one.create(on: client)
            let sealed = try one.batches(50)
            try await client.push(sealed, circle: one.circle, stream: .envelopes, proof: one.proof(sealed))
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

    @Test("a client retries with backoff on the clock it is given until the relay is up, loses nothing, and gives up at its deadline")
    func retries() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let one = OneMemberCircle()
        let circle = one.circle
        let sealed = try one.batches(3)
        _ = try await storage.append(one.history.entries.map(\.bytes), circle: circle, stream: .membership)
        // A port that was free a moment ago, with nothing listening on it now.
        let port = try await withRelay(storage: storage) { _, port in port }
        let client = RelayClient(url: URL(string: "http://127.0.0.1:\(port)")!)

        // Its waits are on a clock the test moves: it tries again only as time passes.
        let clock = TestClock()
        let attempts = Shared(0)
        let push = { @Sendable (client: RelayClient) in
            attempts.withLock { $0 += 1 }
            return try await client.push(sealed, circle: circle, stream: .envelopes, proof: one.proof(sealed))
        }
        let giving = Task { try await client.retrying(until: clock.now.advanced(by: .seconds(1)), on: clock, push) }
        while clock.sleeping == 0 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(attempts.withLock { $0 } == 1, "refused once, it waits for the clock")
        // Past its deadline, the next refusal ends it.
        clock.advance(by: .seconds(1))
        let down = await #expect(throws: RelayError.self) { try await giving.value }
        #expect(down == .unreachable("http://127.0.0.1:\(port): nothing is listening there (is a relay serving there?)"))
        #expect(attempts.withLock { $0 } == 2)

        let pushing = Task { try await client.retrying(until: clock.now.advanced(by: .seconds(30)), on: clock, push) }
        while clock.sleeping == 0 { try await Task.sleep(for: .milliseconds(5)) }
        // Backing off, the client finds the relay up at its next try.
        let pushed = try await withRelay(storage: storage, port: port) { _, _ in
            clock.advance(by: .seconds(2))
            return try await pushing.value
        }
        #expect(pushed == 3 && attempts.withLock { $0 } == 4)
        #expect(try await storage.records(circle: circle, stream: .envelopes, after: 0, limit: 10).map(\.body) == sealed)
    }
}

/// A small tmpfs of the test's own, to fill a relay's disk; mounting needs root.
private struct SmallFilesystem {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-full-\(UUID().uuidString.prefix(8))")

    static let available: Bool = {
        guard let probe = try? SmallFilesystem(kilobytes: 64) else { return false }
        probe.remove()
        return true
    }()

    init(kilobytes: Int) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard runQuietly("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", url.path]) else {
            try? FileManager.default.removeItem(at: url)
            throw CocoaError(.fileWriteNoPermission)
        }
    }

    var freeBytes: Int {
        ((try? FileManager.default.attributesOfFileSystem(forPath: url.path))?[.systemFreeSize] as? NSNumber)?.intValue ?? 0
    }

    func remove() {
        _ = runQuietly("/bin/umount", [url.path])
        try? FileManager.default.removeItem(at: url)
    }
}

/// Runs a tool to its end, its output discarded; true when it succeeded. Waits through the
/// termination handler, so a server the tool leaves running cannot hold the wait.
func runQuietly(_ tool: String, _ arguments: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    guard (try? process.run()) != nil else { return false }
    exited.wait()
    return process.terminationStatus == 0
}

extension RelayTests {
    @Test(
        "the SQLite relay's disk fills: a push is answered 503 naming it, nothing acknowledged is lost, and once there is room the member's retry gets through",
        .enabled(if: SmallFilesystem.available, "needs root, to mount a small tmpfs"), .blocking)
    func diskFull() async throws {
        let disk = try SmallFilesystem(kilobytes: 2048)
        defer { disk.remove() }
        let storage = try SQLiteRelayStorage(directory: disk.url.appendingPathComponent("relay"))
        let one = OneMemberCircle()
        let batches = try one.batches(400)
        try await withRelay(storage: storage) { client, _ in
            try await one.create(on: client)
            // All the room but 64 KiB goes to a file of someone else's.
            let filler = disk.url.appendingPathComponent("filler")
            try Data(count: max(0, disk.freeBytes - (64 << 10))).write(to: filler)
            var acknowledged: [[UInt8]] = []
            var refusal: RelayError?
            for batch in batches {
                do {
                    _ = try await client.push([batch], circle: one.circle, stream: .envelopes, proof: one.proof([batch]))
                    acknowledged.append(batch)
                } catch let error as RelayError {
                    refusal = error
                    break
                }
            }
            let failed = try #require(refusal, "the disk never filled")
            guard case .unreachable(let why) = failed else {
                Issue.record("a full disk is a passing fault, retried: \(failed)")
                return
            }
            #expect(why.contains("full"), "\(why)")
            #expect(try await client.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).map(\.body) == acknowledged)

            try FileManager.default.removeItem(at: filler)
            let next = batches[acknowledged.count]
            _ = try await client.retrying(until: .now + .seconds(10)) {
                try await $0.push([next], circle: one.circle, stream: .envelopes, proof: one.proof([next]))
            }
            #expect(try await client.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000).map(\.body) == acknowledged + [next])
        }
    }
}
