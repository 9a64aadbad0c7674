import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Logging
import Relay
import RelayHTTP
import RelayPostgres
import Sync
import SyncWire

/// Many members in many circles syncing through relays: one SQLite relay, one relay on
/// PostgreSQL, and two relays sharing that database, each in the same run.
struct RelaysBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relays",
        abstract: "Members in circles syncing through one SQLite relay, one PostgreSQL relay and two on one database (run with -c release).",
        discussion: """
            Every member adds --items synchronizable items of its own; the time runs until every \
            member holds those of every other member of its circle, all syncing as running nodes do. The engines \
            and the relays (HTTP on 127.0.0.1) run in this process; with two relays, members \
            alternate between them. Items per second count deliveries (items times receiving \
            members). Target: two PostgreSQL relays at least 0.8x one SQLite relay. --database \
            (or KEYFERRY_POSTGRES, with PGPASSWORD) names the database; scripts/bench relays \
            starts a private one.
            """)

    @Option(help: "Members in all, spread evenly over the circles.") var members = 100
    @Option(help: "Circles.") var circles = 10
    @Option(help: "Items each member adds.") var items = 1_000
    @Option(help: "The PostgreSQL database, postgres://USER@HOST[:PORT]/DATABASE.") var database: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard circles >= 1, members >= 2 * circles, items >= 1 else {
            throw ValidationError("--circles at least 1, --members at least two per circle, --items at least 1.")
        }
    }

    func run() async throws {
        guard let url = database ?? ProcessInfo.processInfo.environment["KEYFERRY_POSTGRES"] else {
            throw ValidationError("give --database postgres://… (or run scripts/bench relays, which starts a private PostgreSQL).")
        }
        let postgres = try PostgresRelayDatabase(url: url, password: ProcessInfo.processInfo.environment[PostgresRelayDatabase.passwordVariable])
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-relays-bench-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }

        let sqlite = try await measure(in: root.appendingPathComponent("sqlite")) { body in
            try await body([try SQLiteRelayStorage(directory: root.appendingPathComponent("sqlite-relay"))])
        }
        let onePostgres = try await measure(in: root.appendingPathComponent("pg1")) { body in
            try await PostgresRelayStorage.withStorage(postgres) { try await body([$0]) }
        }
        let twoPostgres = try await measure(in: root.appendingPathComponent("pg2")) { body in
            try await PostgresRelayStorage.withStorage(postgres) { first in
                try await PostgresRelayStorage.withStorage(postgres) { second in try await body([first, second]) }
            }
        }
        let deliveries = Double(members / circles * circles * items * (members / circles - 1))
        if json {
            printJSON([
                "members": members, "circles": circles, "items": items, "deliveries": deliveries,
                "sqliteSeconds": sqlite, "postgresSeconds": onePostgres, "twoPostgresSeconds": twoPostgres,
                "twoPostgresToSQLite": sqlite / twoPostgres,
            ])
            return
        }
        print("\(members) members in \(circles) circles, \(items) items added on each member; \(Int(deliveries)) deliveries")
        for (name, seconds) in [("one SQLite relay", sqlite), ("one PostgreSQL relay", onePostgres), ("two PostgreSQL relays, one db", twoPostgres)] {
            let figures = String(
                format: "%7.2f s  %8.0f items/s  %5.1f µs/item  %.2fx SQLite", seconds, deliveries / seconds, seconds / deliveries * 1e6, sqlite / seconds)
            print(name.padding(toLength: 30, withPad: " ", startingAt: 0) + figures)
        }
        print("target: two PostgreSQL relays >= 0.80x one SQLite relay")
    }

    /// Serves `storages` (one relay each) over HTTP, makes the circles, and times them converging.
    private func measure(
        in directory: URL, _ storages: (_ body: ([any RelayStorage]) async throws -> Double) async throws -> Double
    ) async throws -> Double {
        try await storages { storages in
            try await withThrowingTaskGroup(of: Void.self) { servers in
                var urls: [URL] = []
                for storage in storages {
                    let (ports, announce) = AsyncStream<Int>.makeStream()
                    servers.addTask {
                        try await RelayServer.run(
                            storage: storage, host: "127.0.0.1", port: 0, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
                        ) {
                            announce.yield($0)
                        }
                    }
                    var iterator = ports.makeAsyncIterator()
                    guard let port = await iterator.next() else { throw CommandFailure("a relay did not start") }
                    urls.append(URL(string: "http://127.0.0.1:\(port)")!)
                }
                defer { servers.cancelAll() }
                return try await converge(in: directory, relays: urls)
            }
        }
    }

    private func converge(in directory: URL, relays: [URL]) async throws -> Double {
        let app = AppManifest(bundleID: "com.example.bench", teamID: "BENCH12345")
        let perCircle = members / circles
        var devices: [Device] = []
        defer { for device in devices { device.powerOff() } }
        var engines: [(Device, SyncEngine)] = []
        for circle in 0..<circles {
            var founder: SyncEngine?
            for member in 0..<perCircle {
                let index = circle * perCircle + member
                let name = "c\(circle)m\(member)"
                let device = try Device.create(at: directory.appendingPathComponent(name), options: DeviceOptions(name: name))
                try device.install(app)
                devices.append(device)
                let relay = relays[index % relays.count]
                let engine: SyncEngine
                if let founder {
                    let voucher = try await founder.vouch(for: SyncEngine.peerIdentity(of: device, name: name))
                    engine = try await SyncEngine.join(voucher, device: device, transport: RelayClient(url: relay))
                } else {
                    engine = try await SyncEngine.create(device: device, name: name, relay: relay, transport: RelayClient(url: relay))
                    founder = engine
                }
                engines.append((device, engine))
            }
        }
        let items = self.items
        let expected = items * (perCircle - 1)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, (device, engine)) in engines.enumerated() {
                group.addTask {
                    let batch = (0..<items).map { item in
                        NewItem(
                            .genericPassword, attributes: [.account: .string("m\(index)-\(item)"), .service: .string("bench")],
                            data: Data(repeating: UInt8(item % 251), count: 256), protection: .afterFirstUnlock, synchronizable: true)
                    }
                    try device.keychain(for: app.bundleID).importItems(batch)
                    var applied = 0
                    while applied < expected {
                        // As a node's sync loop does: a pass the relay did not answer is tried again.
                        let report: SyncReport
                        do { report = try await engine.sync() } catch RelayError.unreachable {
                            try await Task.sleep(for: .milliseconds(50))
                            continue
                        }
                        applied += report.applied
                        if report.applied == 0 { try await Task.sleep(for: .milliseconds(20)) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        return elapsed.seconds
    }
}
