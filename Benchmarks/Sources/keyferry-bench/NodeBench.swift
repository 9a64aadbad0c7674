import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Node
import NodeControl

/// The command line and the control API against a running node, with `keyferry --version`
/// measured in the same run as the baseline for a CLI call.
struct NodeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Latency of `keyferry item get` against a node, and control-API reads per second (run with -c release).",
        discussion: """
            Targets: a CLI call at most 1.5x a bare `keyferry --version`; at least 5,000 reads per second \
            through the API from a batch client. Also measured, as same-run baselines: status calls per \
            second (the lightest route) and reads with one read per call.
            """)

    @Option(help: "CLI calls of each kind.") var calls = 200
    @Option(help: "Reads through the control API.") var reads = 20_000
    @Option(help: "Concurrent API clients.") var clients = 8
    @Option(help: "Reads per call for the batch client (copy-many).") var batch = 100
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard calls > 0, reads > 0, clients > 0, batch > 0 else { throw ValidationError("--calls, --reads, --clients and --batch must be positive.") }
    }

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kf-bench-\(UUID().uuidString.prefix(8))")
        let dir = root.appendingPathComponent("phone")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Device.create(at: dir, options: DeviceOptions(name: "Bench iPhone")).powerOff()
        _ = try await NodeLauncher.start(directory: dir, executable: try KeyferryBinary.url())
        do {
            try await measure(dir)
        } catch {
            _ = try? await NodeLauncher.stop(directory: dir)
            throw error
        }
        try await NodeLauncher.stop(directory: dir)
    }

    private func measure(_ dir: URL) async throws {
        let client = NodeClient(directory: dir)
        let app = "com.example.bench"
        try await client.send(.install, AppManifest(bundleID: app, teamID: "BENCH12345"))
        let item = NewItem(.genericPassword, attributes: [.account: .string("bench")], data: Data(repeating: 7, count: 256))
        let _: NodeAPI.Items = try await client.call(.add, NodeAPI.Add(app: app, item: item))

        let binary = try KeyferryBinary.url()
        // Interleaved, so that the machine's noise falls on both alike.
        var versionSamples: [Double] = []
        var getSamples: [Double] = []
        for _ in 0..<calls {
            versionSamples.append(try seconds { try runQuietly(binary, ["--version"]) })
            getSamples.append(try seconds { try runQuietly(binary, ["item", "get", dir.path, "--app", app, "--account", "bench"]) })
        }
        let version = median(versionSamples)
        let get = median(getSamples)

        let query = ItemQuery(.genericPassword, attributes: [.account: .string("bench")], returning: .data)
        let status = try await callsPerSecond(reads) { _ = try await client.status() }
        let single = try await callsPerSecond(reads) {
            let _: NodeAPI.Items = try await client.call(.copy, NodeAPI.Search(app: app, query: query))
        }
        let batches = try await callsPerSecond(max(1, reads / batch)) {
            let answer: NodeAPI.FoundMany = try await client.call(.copyMany, NodeAPI.SearchMany(app: app, queries: Array(repeating: query, count: batch)))
            guard answer.results.count == batch else { throw ValidationError("copy-many answered \(answer.results.count) of \(batch) queries.") }
            for result in answer.results { _ = try result.get() }
        }

        let figures: [String: Any] = [
            "versionMedianMs": version * 1000, "itemGetMedianMs": get * 1000, "itemGetOverVersion": get / version,
            "statusCallsPerSecond": status.rounded(), "copyReadsPerSecond": single.rounded(),
            "batchedReadsPerSecond": (batches * Double(batch)).rounded(), "batch": batch, "clients": clients,
        ]
        if json {
            printJSON(figures)
            return
        }
        print(String(format: "keyferry --version       median %6.1f ms     (= 1.00)", version * 1000))
        print(String(format: "keyferry item get        median %6.1f ms     %.2fx   (target <= 1.5x)", get * 1000, get / version))
        print(String(format: "API status calls         %8.0f /s    (= 1.00: the lightest route; %d clients)", status, clients))
        print(String(format: "API reads, one per call  %8.0f /s    %.2fx", single, single / status))
        print(
            String(format: "API reads, %3d per call  %8.0f /s    %.2fx   (target >= 5,000/s)", batch, batches * Double(batch), batches * Double(batch) / status)
        )
    }

    /// Calls per second with `clients` concurrent callers sharing `total` calls.
    private func callsPerSecond(_ total: Int, _ call: @escaping @Sendable () async throws -> Void) async throws -> Double {
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<clients {
                group.addTask {
                    for _ in stride(from: worker, to: total, by: clients) { try await call() }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        return Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

}
