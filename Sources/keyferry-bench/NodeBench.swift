import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Node
import NodeControl

/// The command line and the control API against a running node. A CLI call's baseline, in the
/// same run and interleaved with it: curl posting the same request to the node's socket, each
/// a fresh process (`keyferry --version` is measured too, for the start-up share).
struct NodeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Latency of `keyferry item get` against a node, and control-API reads per second (run with -c release).",
        discussion: """
            Targets: `keyferry item get` at most 2.0x `curl --unix-socket DIR/node.sock` of the same route \
            (needs curl; scripts/bench installs it); at least 5,000 reads per second through the API from \
            a batch client. Also measured, as same-run baselines: status calls per second (the lightest \
            route) and reads with one read per call.
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
        try Device.initialize(at: dir, options: DeviceOptions(name: "Bench iPhone"))
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
        let query = ItemQuery(.genericPassword, attributes: [.account: .string("bench")], returning: .data)
        // What `item get` sends, posted by curl to the same route.
        let body = String(decoding: try JSONEncoder().encode(NodeAPI.Search(app: app, query: query)), as: UTF8.self)
        let curlArguments = [
            "--silent", "--fail", "--unix-socket", NodePaths(directory: dir).socket.path, "-X", "POST", "-H", "content-type: application/json",
            "--data-binary", body, "http://node/v1/\(NodeAPI.Route.copy.path)",
        ]
        // hyperfine starts each command without a shell and times it alone.
        let medians = try Self.hyperfine(
            runs: calls,
            [
                [try Self.onPath("curl").path] + curlArguments,
                [binary.path, "--version"],
                [binary.path, "item", "get", dir.path, "--app", app, "--account", "bench"],
            ])
        let (curlMedian, version, get) = (medians[0], medians[1], medians[2])

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
            "curlMedianMs": curlMedian * 1000, "versionMedianMs": version * 1000, "itemGetMedianMs": get * 1000,
            "itemGetOverCurl": get / curlMedian, "itemGetOverVersion": get / version,
            "statusCallsPerSecond": status.rounded(), "copyReadsPerSecond": single.rounded(),
            "batchedReadsPerSecond": (batches * Double(batch)).rounded(), "batch": batch, "clients": clients,
        ]
        if json {
            printJSON(figures)
            return
        }
        print(String(format: "curl, same route         median %6.1f ms     (= 1.00)", curlMedian * 1000))
        print(String(format: "keyferry --version       median %6.1f ms     %.2fx   (start-up alone)", version * 1000, version / curlMedian))
        print(String(format: "keyferry item get        median %6.1f ms     %.2fx   (target <= 2.0x)", get * 1000, get / curlMedian))
        print(String(format: "API status calls         %8.0f /s    (= 1.00: the lightest route; %d clients)", status, clients))
        print(String(format: "API reads, one per call  %8.0f /s    %.2fx", single, single / status))
        print(
            String(format: "API reads, %3d per call  %8.0f /s    %.2fx   (target >= 5,000/s)", batch, batches * Double(batch), batches * Double(batch) / status)
        )
    }

    /// A program from the PATH.
    private static func onPath(_ name: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw CommandFailure("\(name) is not installed: the CLI's latency is measured with hyperfine against curl (scripts/bench installs both).")
    }

    /// The median seconds of each command, a fresh process per run, after five warm-ups.
    private static func hyperfine(runs: Int, _ commands: [[String]]) throws -> [Double] {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("kf-hyperfine-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        // hyperfine splits each command as a shell would: quote every word.
        let quoted = commands.map { $0.map { "'" + $0.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }.joined(separator: " ") }
        try runQuietly(try onPath("hyperfine"), ["-N", "--warmup", "5", "--runs", "\(runs)", "--export-json", report.path] + quoted)
        struct Report: Decodable {
            struct Result: Decodable { var median: Double }
            var results: [Result]
        }
        let medians = try JSONDecoder().decode(Report.self, from: Data(contentsOf: report)).results.map(\.median)
        guard medians.count == commands.count else { throw CommandFailure("hyperfine reported \(medians.count) of \(commands.count) commands.") }
        return medians
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
        return Double(total) / elapsed.seconds
    }

}
