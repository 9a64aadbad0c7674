import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferrySystem
import KeyferryThreads
import Relay
import RelayHTTP
import Sync
import SyncWire

/// Two relays of the shipped binary on one PostgreSQL database, honest members syncing through
/// them while a stranger floods both and one relay is killed and started again.
struct SoakBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-soak",
        abstract: "Two relays on one PostgreSQL under a stranger's flood, one killed and restarted: honest sync latency before and during.",
        discussion: """
            Starts two `keyferry relay serve` processes (KEYFERRY_BINARY) on one database, admitting \
            circles by token. --members members in --circles circles, alternating between the relays, each \
            add an item and sync, --rounds times quietly, then --rounds times while --flooders tasks \
            flood both relays (circles created without a token, unsigned and forged pushes into the \
            honest circles) and a token holder fills a circle of its own with keys and envelopes, and \
            while the first relay is killed with SIGKILL and started again on its port. A pass the relay \
            does not answer is tried again, its latency counted whole. At the end every member must \
            hold every item its circle wrote: nothing a relay acknowledged is lost. --database (or \
            KEYFERRY_POSTGRES, with PGPASSWORD); scripts/bench relay-soak starts a private one.
            """)

    @Option(help: "Honest members, spread evenly over the circles.") var members = 100
    @Option(help: "Circles of honest members.") var circles = 10
    @Option(help: "Items each member adds in each phase, one a sync.") var rounds = 20
    @Option(help: "Concurrent tasks flooding the relays.") var flooders = 8
    @Option(help: "The PostgreSQL database, postgres://USER@HOST[:PORT]/DATABASE.") var database: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard circles >= 1, members >= 2 * circles, rounds >= 3, flooders >= 1 else {
            throw ValidationError("--circles at least 1, --members at least two per circle, --rounds at least 3, --flooders at least 1.")
        }
    }

    func run() async throws {
        guard let url = database ?? ProcessInfo.processInfo.environment["KEYFERRY_POSTGRES"] else {
            throw ValidationError("give --database postgres://… (or run scripts/bench relay-soak, which starts a private PostgreSQL).")
        }
        let binary = try KeyferryBinary.url()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-soak-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let token = "soak-\(UUID().uuidString)"
        let tokens = root.appendingPathComponent("tokens")
        try (token + "\n").write(to: tokens, atomically: true, encoding: .utf8)
        let (quota, reserve) = (8 << 20, 1 << 20)
        func relayArguments(_ name: String, port: Int) -> [String] {
            [
                "relay", "serve", "--data", root.appendingPathComponent(name).path, "--database", url, "--listen", "127.0.0.1:\(port)",
                "--admission", "token", tokens.path, "--quota", "\(quota)", "--reserve", "\(reserve)", "--json",
            ]
        }
        var first = try await RelayProcess.start(binary, relayArguments("a", port: 0))
        let second = try await RelayProcess.start(binary, relayArguments("b", port: 0))
        defer {
            first.stop()
            second.stop()
        }
        let relays = [first.url, second.url]

        let honest = try await HonestCircles.make(in: root, members: members, circles: circles, relays: relays, token: token)
        defer { honest.powerOff() }

        let before = try await honest.rounds(rounds, phase: 0)

        let flood = FloodCounts()
        let floodTasks = (0..<flooders).map { index in
            Task { await Self.flood(relays[index % 2], circles: honest.circleIDs, counts: flood) }
        }
        let hostile = Task { try await Self.fillOwnCircle(relays[1], token: token, counts: flood) }
        // The first relay is killed once the honest members are a third of the way through the
        // phase, and started again on its port as soon as it is gone.
        let (third, reached) = AsyncStream<Void>.makeStream()
        let phase = Task {
            try await honest.rounds(rounds, phase: 1) { completed, total in
                if completed == total / 3 { reached.yield() }
            }
        }
        var iterator = third.makeAsyncIterator()
        _ = await iterator.next()
        first.kill()
        first = try await RelayProcess.start(binary, relayArguments("a", port: first.url.port!))
        let during = try await phase.value
        for task in floodTasks { task.cancel() }
        for task in floodTasks { await task.value }
        let hostileBytes = try await hostile.value
        guard flood.strangersAdmitted == 0 else { throw CommandFailure("a relay kept \(flood.strangersAdmitted) of a stranger's pushes") }
        guard hostileBytes <= quota + reserve else { throw CommandFailure("the hostile circle holds \(hostileBytes) B, past \(quota + reserve)") }

        let delivered = try await honest.settle(itemsPerMember: 2 * rounds)
        let figures: [String: Any] = [
            "members": members, "circles": circles, "rounds": rounds,
            "beforeP50Milliseconds": before.percentile(0.5), "beforeP99Milliseconds": before.percentile(0.99),
            "duringP50Milliseconds": during.percentile(0.5), "duringP99Milliseconds": during.percentile(0.99),
            "floodRequests": flood.total, "floodRefused": flood.refused, "hostilePushesKept": flood.hostileKept,
            "hostileCircleBytes": hostileBytes, "hostileCircleLimit": quota + reserve, "deliveries": delivered,
            "relayRestarts": 1,
        ]
        if json { return printJSON(figures) }
        print("\(members) members in \(circles) circles on two relays sharing one PostgreSQL; \(rounds) syncs each per phase")
        print(String(format: "sync pass, quiet:              p50 %7.1f ms   p99 %7.1f ms", before.percentile(0.5), before.percentile(0.99)))
        print(String(format: "sync pass, flooded + restart:  p50 %7.1f ms   p99 %7.1f ms", during.percentile(0.5), during.percentile(0.99)))
        print(
            "flood: \(flood.total) requests, \(flood.refused) refused, none of a stranger's kept; the token holder's own circle took "
                + "\(flood.hostileKept) pushes and holds \(hostileBytes) B of at most \(quota + reserve)")
        print(
            "relay A killed with SIGKILL and restarted once; every member holds every item of its circle (\(delivered) deliveries): nothing acknowledged lost")
    }

    /// A stranger without a token: circles created, junk pushed unsigned or signed by nobody,
    /// as fast as the relay answers. Every one must be refused.
    private static func flood(_ relay: URL, circles: [UUID], counts: FloodCounts) async {
        let client = RelayClient(url: relay, timeout: .seconds(10))
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        var turn = 0
        while !Task.isCancelled {
            turn += 1
            let junk = [SystemEntropy().bytes(512)]
            let circle = circles[turn % circles.count]
            do {
                switch turn % 3 {
                case 0:
                    let history = CircleHistory(creator: DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()), name: "stranger")
                    try await client.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership, proof: nil)
                case 1:
                    try await client.push(junk, circle: circle, stream: .envelopes, proof: nil)
                default:
                    try await client.push(
                        junk, circle: circle, stream: .keys, proof: PushProof(signing: junk, circle: circle, stream: .keys, key: stranger.signingKey))
                }
                counts.count(.strangerAdmitted)
            } catch RelayError.refused {
                counts.count(.refused)
            } catch {
                // The relay being killed: the flood goes on.
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// A token holder that turns hostile: its own circle, pushed full of key records and then
    /// envelopes until the relay refuses both. Returns the bytes the relay holds for it.
    private static func fillOwnCircle(_ relay: URL, token: String, counts: FloodCounts) async throws -> Int {
        let client = RelayClient(url: relay, timeout: .seconds(10), admissionToken: token)
        let owner = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let history = CircleHistory(creator: owner, name: "hostile")
        let circle = history.circle
        try await client.push(history.entries.map(\.bytes), circle: circle, stream: .membership, proof: nil)
        var link = BatchLink.start
        var full = (keys: false, envelopes: false)
        while !(full.keys && full.envelopes) {
            let keys = CircleKeys(circle: circle, epoch: history.epoch)
            let stream: RelayStream = full.keys ? .envelopes : .keys
            let bodies: [[UInt8]]
            if stream == .keys {
                bodies = (0..<100).map { _ in
                    KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: owner.signingKey)).bytes
                }
            } else {
                let envelopes = try (0..<50).map { _ in try junkEnvelope(keys: keys, author: owner.signingKey.publicKey) }
                let batch = EnvelopeBatch(envelopes, circle: circle, author: owner.signingKey, after: link)
                link = batch.link
                bodies = [batch.bytes]
            }
            do {
                try await client.push(
                    bodies, circle: circle, stream: stream, proof: PushProof(signing: bodies, circle: circle, stream: stream, key: owner.signingKey))
                counts.count(.hostileKept)
            } catch RelayError.refused(let why) where why.contains("507") {
                counts.count(.refused)
                if stream == .keys { full.keys = true } else { full.envelopes = true }
            } catch RelayError.unreachable {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        var bytes = 0
        for stream in RelayStream.allCases {
            var cursor: UInt64 = 0
            while true {
                let page = try await client.pull(circle: circle, stream: stream, after: cursor, limit: 1_000)
                guard let last = page.last else { break }
                bytes += page.reduce(0) { $0 + $1.body.count }
                cursor = last.cursor
            }
        }
        return bytes
    }

    /// A fresh item of 4 KiB, in its envelope.
    private static func junkEnvelope(keys: CircleKeys, author: SigningPublicKey) throws -> SealedEnvelope {
        let now = Date()
        let record = ItemRecord(
            itemClass: .genericPassword, uuid: UUID(), accessGroup: "HOSTILE123.com.example.flood", protection: .afterFirstUnlock, synchronizable: true,
            accessControl: nil, creationDate: now, modificationDate: now, attributes: [.account: .string(UUID().uuidString)],
            data: Data(SystemEntropy().bytes(4_096)))
        return try sealedEnvelope(
            SyncedItem(version: HybridTimestamp(milliseconds: UInt64(now.timeIntervalSince1970 * 1000)), isTombstone: false, record: record),
            keys: keys, author: author)
    }
}

/// What the flood asked and how the relays answered.
final class FloodCounts: Sendable {
    enum Answer { case refused, strangerAdmitted, hostileKept }
    private let counts = Locked([Answer: Int]())
    func count(_ answer: Answer) { counts.withLock { $0[answer, default: 0] += 1 } }
    var refused: Int { counts.withLock { $0[.refused] ?? 0 } }
    var strangersAdmitted: Int { counts.withLock { $0[.strangerAdmitted] ?? 0 } }
    var hostileKept: Int { counts.withLock { $0[.hostileKept] ?? 0 } }
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }
}

/// Sync passes done, across the members' tasks.
final class PassCount: Sendable {
    private let count = Locked(0)
    /// Counts one more; returns how many now.
    func add() -> Int {
        count.withLock {
            $0 += 1
            return $0
        }
    }
}

/// A `keyferry relay serve` process, and the URL it announced.
struct RelayProcess {
    let process: Process
    let url: URL

    static func start(_ binary: URL, _ arguments: [String]) async throws -> RelayProcess {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The announcement is its first line: it is listening once it is printed.
        let line = try await onThread {
            var data = Data()
            while !data.contains(UInt8(ascii: "\n")) {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                data += chunk
            }
            return data
        }
        guard let announced = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
            let url = (announced["url"] as? String).flatMap({ URL(string: $0) })
        else {
            process.terminate()
            throw CommandFailure("the relay did not start: \(String(decoding: line, as: UTF8.self))")
        }
        return RelayProcess(process: process, url: url)
    }

    func kill() {
        ProcessControl.send(.kill, to: process.processIdentifier)
        process.waitUntilExit()
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}

/// The honest members: circles made through the relays by a token holder, devices joined by
/// voucher, each member on one of the relays.
struct HonestCircles: Sendable {
    struct Member: Sendable {
        let device: Device
        let engine: SyncEngine
        let circle: Int
    }

    let members: [Member]
    let circleIDs: [UUID]
    private static let app = AppManifest(bundleID: "com.example.soak", teamID: "SOAK123456")

    static func make(in root: URL, members count: Int, circles: Int, relays: [URL], token: String) async throws -> HonestCircles {
        let perCircle = count / circles
        var members: [Member] = []
        var circleIDs: [UUID] = []
        for circle in 0..<circles {
            var founder: SyncEngine?
            for index in 0..<perCircle {
                let name = "c\(circle)m\(index)"
                let device = try Device.create(at: root.appendingPathComponent(name), options: DeviceOptions(name: name))
                try device.install(app)
                let relay = relays[(circle * perCircle + index) % relays.count]
                let transport = RelayClient(url: relay, admissionToken: token)
                let engine: SyncEngine
                if let founder {
                    let voucher = try await founder.vouch(for: SyncEngine.peerIdentity(of: device, name: name))
                    engine = try await SyncEngine.join(voucher, device: device, transport: transport)
                } else {
                    engine = try await SyncEngine.create(device: device, name: name, relay: relay, transport: transport)
                    founder = engine
                    circleIDs.append(await engine.circle)
                }
                members.append(Member(device: device, engine: engine, circle: circle))
            }
        }
        return HonestCircles(members: members, circleIDs: circleIDs)
    }

    func powerOff() { for member in members { member.device.powerOff() } }

    /// Each member adds an item and syncs, `rounds` times, all members at once; returns each
    /// pass's latency, a pass the relay did not answer tried again and counted whole.
    /// `progress` hears how many passes are done of how many.
    func rounds(_ rounds: Int, phase: Int, progress: @escaping @Sendable (Int, Int) -> Void = { _, _ in }) async throws -> Latencies {
        let done = PassCount()
        let total = rounds * members.count
        return try await withThrowingTaskGroup(of: [Double].self) { group in
            for (index, member) in members.enumerated() {
                group.addTask {
                    var latencies: [Double] = []
                    for round in 0..<rounds {
                        _ = try member.device.keychain(for: Self.app.bundleID).add(
                            NewItem(
                                .genericPassword, attributes: [.account: .string("m\(index)-p\(phase)-r\(round)"), .service: .string("soak")],
                                data: Data(repeating: UInt8(round % 251), count: 256), protection: .afterFirstUnlock, synchronizable: true))
                        let start = ContinuousClock.now
                        while true {
                            do {
                                let report = try await member.engine.sync()
                                if report.pushed > 0 || report.waitingToPush == 0 { break }
                            } catch RelayError.unreachable {
                                try await Task.sleep(for: .milliseconds(50))
                            }
                        }
                        let took = ContinuousClock.now - start
                        latencies.append(took.seconds * 1e3)
                        progress(done.add(), total)
                    }
                    return latencies
                }
            }
            var all: [Double] = []
            for try await latencies in group { all += latencies }
            return Latencies(samples: all)
        }
    }

    /// Syncs every member until it holds every item its circle wrote; returns the deliveries.
    func settle(itemsPerMember: Int, within limit: Duration = .seconds(300)) async throws -> Int {
        let perCircle = members.count / Set(members.map(\.circle)).count
        let expected = perCircle * itemsPerMember
        let deadline = ContinuousClock.now + limit
        try await withThrowingTaskGroup(of: Void.self) { group in
            for member in members {
                group.addTask {
                    while try member.device.status().itemCount < expected {
                        guard ContinuousClock.now < deadline else {
                            throw CommandFailure(
                                "\(member.device.info.name) holds \(try member.device.status().itemCount) of its circle's \(expected) items: something acknowledged was lost"
                            )
                        }
                        do { _ = try await member.engine.sync() } catch RelayError.unreachable { try await Task.sleep(for: .milliseconds(50)) }
                    }
                }
            }
            try await group.waitForAll()
        }
        return members.count * (expected - itemsPerMember)
    }
}

/// Latencies in milliseconds.
struct Latencies {
    var samples: [Double]

    func percentile(_ fraction: Double) -> Double {
        let sorted = samples.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.down)))]
    }
}
