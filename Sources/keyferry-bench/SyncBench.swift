import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Logging
import Relay
import RelayHTTP
import Sync
import SyncWire

/// Items added on one node of three, until all three hold them, through a relay over HTTP on
/// loopback; against inserting the same rows into a plain SQLite table in the same run.
struct SyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Time three members converging on N items added on one of them (run with -c release).",
        discussion: """
            The devices, their engines and the relay (SQLite storage, HTTP on 127.0.0.1) run in this \
            process; the time runs from the batch add on the first device until the other two hold \
            every item, the other two syncing all along as running nodes do. Target: at least 20,000 \
            items per second end to end.
            """)

    @Option(help: "Synchronizable items added on the first device.") var items = 10_000
    @Option(help: "Runs; the median is reported.") var runs = 3
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard items >= 1, runs >= 1 else { throw ValidationError("--items and --runs must be at least 1.") }
    }

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-sync-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        var converge: [Double] = []
        var baseline: [Double] = []
        for run in 0..<runs {
            let directory = root.appendingPathComponent("run\(run)")
            converge.append(try await convergence(of: items, in: directory))
            let plain = try PlainSQLite(at: directory.appendingPathComponent("plain.db"))
            let secret = Data(repeating: 7, count: 256)
            baseline.append(try seconds { try plain.insertBatch(items, value: secret) })
        }
        let seconds = median(converge)
        let plainSeconds = median(baseline)
        let rate = Double(items) / seconds
        if json {
            printJSON([
                "items": items, "runs": runs, "convergeSeconds": seconds, "convergeRuns": converge, "itemsPerSecond": rate,
                "plainInsertSeconds": plainSeconds, "ratioToPlainInsert": seconds / plainSeconds,
            ])
            return
        }
        print("\(items) items added on one of three members; medians of \(runs) runs")
        print(String(format: "plain SQLite batch insert        %7.3f s   (= 1.00)", plainSeconds))
        print(String(format: "all three members hold them      %7.3f s   %.1fx    %.0f items/s (target >= 20000)", seconds, seconds / plainSeconds, rate))
    }

}

/// One fresh circle of three; the seconds from the add of `items` items on the first until the
/// others hold every one.
func convergence(of items: Int, in directory: URL) async throws -> Double {
    try await convergence(of: items, in: directory, thenJoining: false).converged
}

/// As `convergence(of:in:)`; with `thenJoining`, a fourth device then joins the circle, and
/// `firstSync` is the seconds from its first sync until it holds every item: a new member's
/// first sync into an empty keychain.
func convergence(of items: Int, in directory: URL, thenJoining: Bool) async throws -> (converged: Double, firstSync: Double?) {
    let storage = try SQLiteRelayStorage(directory: directory.appendingPathComponent("relay"))
    let (ports, announce) = AsyncStream<Int>.makeStream()
    let server = Task {
        try await RelayServer.run(storage: storage, host: "127.0.0.1", port: 0, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }) {
            announce.yield($0)
        }
    }
    defer { server.cancel() }
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { throw CommandFailure("the relay did not start") }
    let relay = URL(string: "http://127.0.0.1:\(port)")!

    let app = AppManifest(bundleID: "com.example.bench", teamID: "BENCH12345")
    var devices: [Device] = []
    for name in ["phone", "tablet", "laptop"] {
        let device = try Device.create(at: directory.appendingPathComponent(name), options: DeviceOptions(name: name, passcode: "123456"))
        try device.install(app)
        devices.append(device)
    }
    defer { for device in devices { device.powerOff() } }
    let phone = try await SyncEngine.create(device: devices[0], name: "phone", relay: relay, transport: RelayClient(url: relay))
    var others: [SyncEngine] = []
    for device in devices.dropFirst() {
        let voucher = try await phone.vouch(for: SyncEngine.peerIdentity(of: device, name: device.info.name))
        others.append(try await SyncEngine.join(voucher, device: device, transport: RelayClient(url: relay)))
    }

    // As nodes do on their own: the others keep syncing while the first pushes.
    let start = ContinuousClock.now
    // Made and imported 10,000 at a time, so the benchmark's own input does not grow with it.
    for first in stride(from: 0, to: items, by: 10_000) {
        let batch = (first..<min(first + 10_000, items)).map { index in
            NewItem(
                .genericPassword, attributes: [.account: .string("user\(index)"), .service: .string("bench")],
                data: Data(repeating: UInt8(index % 251), count: 256), protection: .afterFirstUnlock, synchronizable: true)
        }
        try devices[0].keychain(for: app.bundleID).importItems(batch)
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { _ = try await phone.sync() }
        for engine in others {
            group.addTask {
                var applied = 0
                while applied < items {
                    let report = try await engine.sync()
                    applied += report.applied
                    if report.applied == 0 { try await Task.sleep(for: .milliseconds(5)) }
                }
            }
        }
        try await group.waitForAll()
    }
    let elapsed = ContinuousClock.now - start
    for device in devices.dropFirst() {
        let held = try device.status().itemCount
        guard held == items else { throw CommandFailure("\(device.info.name) holds \(held) of \(items) items") }
    }
    guard thenJoining else { return (elapsed.seconds, nil) }

    let newcomer = try Device.create(at: directory.appendingPathComponent("new-member"), options: DeviceOptions(name: "new member", passcode: "123456"))
    defer { newcomer.powerOff() }
    try newcomer.install(app)
    let voucher = try await phone.vouch(for: SyncEngine.peerIdentity(of: newcomer, name: "new member"))
    let member = try await SyncEngine.join(voucher, device: newcomer, transport: RelayClient(url: relay))
    let joined = ContinuousClock.now
    var applied = 0
    while applied < items {
        let report = try await member.sync()
        applied += report.applied
        guard report.applied > 0 || report.more else { throw CommandFailure("the new member stopped at \(applied) of \(items) items") }
    }
    return (elapsed.seconds, (ContinuousClock.now - joined).seconds)
}
