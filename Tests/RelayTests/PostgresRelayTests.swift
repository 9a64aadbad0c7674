import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import Relay
import RelayHTTP
import RelayPostgres
import SyncWire
import Testing

/// The PostgreSQL server `scripts/test` starts for these tests (scripts/postgres). Where it
/// does not run, the suite says so and is skipped; under CI it must be there.
enum TestPostgres {
    static let url = ProcessInfo.processInfo.environment["KEYFERRY_POSTGRES"]
    static let expected = url != nil || ProcessInfo.processInfo.environment["CI"] != nil

    static func database() throws -> PostgresRelayDatabase {
        let url = try #require(url, "KEYFERRY_POSTGRES is not set: run the tests with scripts/test, which starts PostgreSQL")
        return try PostgresRelayDatabase(url: url, password: ProcessInfo.processInfo.environment[PostgresRelayDatabase.passwordVariable])
    }
}

@Suite("Relay on PostgreSQL", .enabled(if: TestPostgres.expected, "needs the PostgreSQL server scripts/test starts"))
struct PostgresRelayTests {
    @Test("streams apart, each record once, cursors growing, a conditional append refused when the stream moved, sizes counted; a restart keeps it all")
    func storage() async throws {
        let database = try TestPostgres.database()
        let (a, b) = (UUID(), UUID())
        try await PostgresRelayStorage.withStorage(database) { storage in
            #expect(try await storage.append([[1], [2], [3]], circle: a, stream: .envelopes) == 3)
            #expect(try await storage.append([[2], [4]], circle: a, stream: .envelopes) == 1, "a retried record is not stored twice")
            #expect(try await storage.append([[1]], circle: b, stream: .envelopes) == 1)
            #expect(try await storage.append([[9]], circle: a, stream: .membership, ifLastIs: 0) == 1)
            let last = try #require(try await storage.records(circle: a, stream: .membership, after: 0, limit: 10).last).cursor
            await #expect(throws: RelayStorageConflict.self) { try await storage.append([[10]], circle: a, stream: .membership, ifLastIs: 0) }
            #expect(try await storage.append([[10]], circle: a, stream: .membership, ifLastIs: last) == 1)
            #expect(try await storage.records(circle: a, stream: .membership, after: 0, limit: 10).map(\.body) == [[9], [10]])
            #expect(try await storage.byteCount(circle: a) == 6)
        }
        // Connecting again migrates nothing and finds everything.
        try await PostgresRelayStorage.withStorage(database) { storage in
            let all = try await storage.records(circle: a, stream: .envelopes, after: 0, limit: 100)
            #expect(all.map(\.body) == [[1], [2], [3], [4]])
            #expect(zip(all, all.dropFirst()).allSatisfy { $0.cursor < $1.cursor })
            #expect(try await storage.records(circle: a, stream: .envelopes, after: all[1].cursor, limit: 1).map(\.body) == [[3]])
            #expect(try await storage.records(circle: b, stream: .envelopes, after: 0, limit: 100).map(\.body) == [[1]])
            #expect(try await storage.records(circle: b, stream: .keys, after: 0, limit: 100).isEmpty)
        }
    }

    @Test("with TLS required, a server that answers \"no TLS\" (as a stripping attacker does) is refused before any password is sent")
    func requiredTLSIsNotStripped() async throws {
        // The test server speaks no TLS: to the SSLRequest it answers "N", as an attacker would.
        let url = try #require(TestPostgres.url).replacingOccurrences(of: "sslmode=disable", with: "sslmode=require")
        let database = try PostgresRelayDatabase(url: url, password: ProcessInfo.processInfo.environment[PostgresRelayDatabase.passwordVariable])
        #expect(database.sslMode == .require)
        let refusal = await #expect(throws: RelayStorageError.self) {
            try await PostgresRelayStorage.withStorage(database) { _ in }
        }
        #expect(refusal.map { "\($0)" }?.contains("speaks no TLS") == true, "\(String(describing: refusal))")
    }

    @Test("two relays on one database, pushing at once into one circle: together they never take it past its quota")
    func quotaAcrossRelays() async throws {
        let one = OneMemberCircle()
        let quota = 8 << 10
        let pushes = try (0..<16).map { _ in try one.batches(4) }
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { first in
            try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { second in
                let relays = [first, second].map { LocalRelay(storage: $0, limits: RelayLimits(circleBytes: quota)) }
                try await one.create(on: relays[0])
                let refused = await withTaskGroup(of: Bool.self) { group in
                    for (index, batch) in pushes.enumerated() {
                        group.addTask {
                            (try? await relays[index % 2].push(batch, circle: one.circle, stream: .envelopes, proof: one.proof(batch))) == nil
                        }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(refused > 0, "the pushes were meant to overflow the quota")
                #expect(try await first.byteCount(circle: one.circle) <= quota)
            }
        }
    }

    @Test("two relays on one database, four pushers at once: a reader pulling meanwhile gets every record exactly once, cursors only growing")
    func twoRelays() async throws {
        let one = OneMemberCircle()
        let batches = try one.batches(120)
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { first in
            try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { second in
                try await withRelay(storage: first) { relayA, _ in
                    try await withRelay(storage: second) { relayB, _ in
                        try await one.create(on: relayA)
                        let relays = [relayA, relayB]
                        let seen = try await withThrowingTaskGroup(of: [RelayRecord].self) { group in
                            for pusher in 0..<4 {
                                group.addTask {
                                    for (n, batch) in batches.enumerated() where n % 4 == pusher {
                                        _ = try await relays[n % 2].push([batch], circle: one.circle, stream: .envelopes, proof: one.proof([batch]))
                                    }
                                    return []
                                }
                            }
                            // A reader that trusts cursors as members do: had a record committed
                            // below one it already saw, it would never get it.
                            group.addTask {
                                var seen: [RelayRecord] = []
                                let deadline = ContinuousClock.now + .seconds(60)
                                while seen.count < batches.count, ContinuousClock.now < deadline {
                                    let page = try await relays[seen.count % 2].pull(
                                        circle: one.circle, stream: .envelopes, after: seen.last?.cursor ?? 0, limit: 7)
                                    seen += page
                                    if page.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
                                }
                                return seen
                            }
                            return try await group.reduce(into: []) { $0 += $1 }
                        }
                        #expect(seen.count == batches.count)
                        #expect(Set(seen.map(\.body)) == Set(batches))
                        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.cursor < $1.cursor })
                        let fromB = try await relayB.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000)
                        #expect(fromB.map(\.cursor) == seen.map(\.cursor), "both relays answer the same log")
                    }
                }
            }
        }
    }

    @Test("two relays given rival membership entries at once: one is kept, the other refused as a conflict, and the log holds no rival")
    func rivalMembership() async throws {
        // Ten rounds, each a new circle: the two pushes land in either order, or at once.
        try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { first in
            try await PostgresRelayStorage.withStorage(try TestPostgres.database()) { second in
                let (relayA, relayB) = (LocalRelay(storage: first), LocalRelay(storage: second))
                for _ in 0..<10 {
                    let one = OneMemberCircle()
                    let (x, y) = (
                        DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()),
                        DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
                    )
                    let joinX = MembershipEntry(.join, subject: x.peer(named: "x"), after: one.history, signer: one.author)
                    let joinY = MembershipEntry(.join, subject: y.peer(named: "y"), after: one.history, signer: one.author)
                    _ = try await relayA.push(one.history.entries.map(\.bytes), circle: one.circle, stream: .membership, proof: nil)
                    async let pushX = outcome { try await relayA.push([joinX.bytes], circle: one.circle, stream: .membership, proof: nil) }
                    async let pushY = outcome { try await relayB.push([joinY.bytes], circle: one.circle, stream: .membership, proof: nil) }
                    let outcomes = await [pushX, pushY]
                    let kept = outcomes.filter { if case .success(1) = $0 { true } else { false } }
                    let refused = outcomes.filter { if case .failure(RelayError.refused) = $0 { true } else { false } }
                    #expect(kept.count == 1 && refused.count == 1, "\(outcomes)")
                    let log = try await first.records(circle: one.circle, stream: .membership, after: 0, limit: 10)
                    #expect(log.count == one.history.entries.count + 1)
                }
            }
        }
    }
}

/// A PostgreSQL server of a test's own (scripts/postgres), which the test may stop and start.
private struct PrivatePostgres {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-pg-\(UUID().uuidString.prefix(8))")
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/postgres")

    /// Starts it (again, on the same port) and returns its address.
    func start() throws -> PostgresRelayDatabase {
        try run("start")
        // Its output is discarded: the address is read from the files it keeps.
        let port = try String(contentsOf: directory.appendingPathComponent("port"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let password = try String(contentsOf: directory.appendingPathComponent("password"), encoding: .utf8)
        return try PostgresRelayDatabase(url: "postgres://keyferry@127.0.0.1:\(port)/keyferry?sslmode=disable", password: password)
    }

    func stop() throws { try run("stop") }

    func remove() {
        try? stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private func run(_ command: String) throws {
        try #require(runQuietly("/bin/bash", [Self.script.path, command, directory.path]), "scripts/postgres \(command) failed")
    }
}

extension PostgresRelayTests {
    @Test(
        "PostgreSQL stopped and started again while a member pushes: the relay answers 503 naming the database, the member backs off and catches up, nothing acknowledged is lost or doubled",
        .blocking)
    func databaseRestart() async throws {
        _ = try TestPostgres.database()
        let server = PrivatePostgres()
        defer { server.remove() }
        let database = try server.start()
        let one = OneMemberCircle()
        let batches = try one.batches(40)
        try await PostgresRelayStorage.withStorage(database) { storage in
            try await withRelay(storage: storage) { client, _ in
                try await one.create(on: client)
                // What the member has seen: pushes acknowledged, and attempts refused.
                let seen = Shared((acknowledged: 0, refused: 0))
                let acknowledged = try await withThrowingTaskGroup(of: Int.self) { group in
                    group.addTask {
                        var acknowledged = 0
                        for batch in batches {
                            let proof = one.proof([batch])
                            _ = try await client.retrying(until: .now + .seconds(60)) {
                                do {
                                    return try await $0.push([batch], circle: one.circle, stream: .envelopes, proof: proof)
                                } catch {
                                    seen.withLock { $0.refused += 1 }
                                    throw error
                                }
                            }
                            acknowledged += 1
                            seen.withLock { $0.acknowledged = acknowledged }
                            try await Task.sleep(for: .milliseconds(20))
                        }
                        return acknowledged
                    }
                    // The database goes once pushes are flowing, and comes back once the member
                    // has been refused and is backing off.
                    while seen.withLock({ $0.acknowledged }) < 3 { try await Task.sleep(for: .milliseconds(5)) }
                    try server.stop()
                    let refusal = await #expect(throws: RelayError.self) {
                        try await client.pull(circle: one.circle, stream: .envelopes, after: 0)
                    }
                    #expect("\(refusal.map { "\($0)" } ?? "")".contains("database"), "\(String(describing: refusal))")
                    while seen.withLock({ $0.refused }) < 2 { try await Task.sleep(for: .milliseconds(5)) }
                    _ = try server.start()
                    return try await group.reduce(0, +)
                }
                #expect(acknowledged == batches.count)
                let held = try await client.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000)
                #expect(held.map(\.body) == batches, "every batch once, in the order acknowledged")
            }
        }
    }
}

private func outcome(_ push: () async throws -> Int) async -> Result<Int, any Error> {
    do { return .success(try await push()) } catch { return .failure(error) }
}

@Suite("Relay on PostgreSQL, its patience")
struct PostgresPatienceTests {
    @Test("a database call that ignores cancellation still fails once the patience has passed, naming why", .timeLimit(.minutes(1)))
    func ignoredCancellation() async throws {
        // A call that returns only when released, whatever cancels it: as the pool's wait for a
        // server that went away once did.
        let (released, release) = AsyncStream<Void>.makeStream()
        let holdout = Task.detached { for await _ in released {} }
        let error = await #expect(throws: RelayStorageError.self) {
            try await PostgresRelayStorage.withPatience(within: .milliseconds(50)) {
                await holdout.value  // deaf to cancellation
                return 1
            }
        }
        #expect(error?.reason == "no answer from the database in 0 s")
        release.finish()
        #expect(try await PostgresRelayStorage.withPatience(within: .seconds(60)) { 7 } == 7, "an answer in time is the answer")
    }
}

@Suite("PostgreSQL database addresses")
struct PostgresAddressTests {
    @Test("TLS is required by default whatever the host, loopback included; sslmode=disable names the exception, prefer is refused")
    func tlsByDefault() throws {
        for host in ["db.example", "10.0.0.5", "[2001:db8::1]", "127.example.com", "127.0.0.1", "localhost", "[::1]"] {
            #expect(try PostgresRelayDatabase(url: "postgres://keyferry@\(host):5432/relay", password: nil).sslMode == .require, "\(host)")
        }
        for host in ["127.0.0.1", "db.example"] {
            let prefer = #expect(throws: RelayStorageError.self) {
                try PostgresRelayDatabase(url: "postgres://keyferry@\(host)/relay?sslmode=prefer", password: nil)
            }
            #expect(prefer.map { "\($0)" }?.contains("sslmode=disable turns it off by name") == true)
        }
        #expect(try PostgresRelayDatabase(url: "postgres://keyferry@db.example/relay?sslmode=disable", password: nil).sslMode == .disable)
        let withAuthority = try PostgresRelayDatabase(url: "postgres://keyferry@db.example/relay?sslrootcert=/etc/db-ca.pem", password: nil)
        #expect(withAuthority.sslRootCertificate == "/etc/db-ca.pem" && withAuthority.sslMode == .require)
        let unknown = #expect(throws: RelayStorageError.self) {
            try PostgresRelayDatabase(url: "postgres://keyferry@db.example/relay?sslmode=allow", password: nil)
        }
        #expect(unknown.map { "\($0)" }?.contains("only sslmode=") == true)
    }
}
