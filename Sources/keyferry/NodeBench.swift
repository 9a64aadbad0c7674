import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Node

/// The command line and the control API against a running node, with `keyferry --version`
/// measured in the same run as the baseline for a CLI call.
struct NodeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Latency of `keyferry item get` against a node, and control-API reads per second (run with -c release).",
        discussion: "Targets: a CLI call at most 1.5x a bare `keyferry --version`; at least 5,000 reads per second through the API.")

    @Option(help: "CLI calls of each kind.") var calls = 200
    @Option(help: "Reads through the control API.") var reads = 20_000
    @Option(help: "Concurrent API clients.") var clients = 8
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard calls > 0, reads > 0, clients > 0 else { throw ValidationError("--calls, --reads and --clients must be positive.") }
    }

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kf-bench-\(UUID().uuidString.prefix(8))")
        let dir = root.appendingPathComponent("phone")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Device.create(at: dir, options: DeviceOptions(name: "Bench iPhone")).powerOff()
        _ = try await NodeLauncher.start(directory: dir)
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

        let binary = NodeLauncher.currentExecutable
        let version = try medianSeconds(calls) { try runQuietly(binary, ["--version"]) }
        let get = try medianSeconds(calls) { try runQuietly(binary, ["item", "get", dir.path, "--app", app, "--account", "bench"]) }

        let search = NodeAPI.Search(app: app, query: ItemQuery(.genericPassword, attributes: [.account: .string("bench")], returning: .data))
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<clients {
                group.addTask {
                    for _ in stride(from: worker, to: reads, by: clients) {
                        let _: NodeAPI.Items = try await client.call(.copy, search)
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        let perSecond = Double(reads) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)

        let figures: [String: Any] = [
            "versionMedianMs": version * 1000, "itemGetMedianMs": get * 1000, "itemGetOverVersion": get / version,
            "apiReadsPerSecond": perSecond.rounded(), "clients": clients,
        ]
        if json { printJSON(figures); return }
        print(String(format: "keyferry --version     median %6.1f ms   (= 1.00)", version * 1000))
        print(String(format: "keyferry item get      median %6.1f ms   %.2fx   (target <= 1.5x)", get * 1000, get / version))
        print(String(format: "control API reads      %8.0f /s  with %d clients   (target >= 5,000/s)", perSecond, clients))
    }

    private func medianSeconds(_ count: Int, _ body: () throws -> Void) throws -> Double {
        var samples = [Double]()
        for _ in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        return samples.sorted()[count / 2]
    }

    private func runQuietly(_ binary: URL, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ValidationError("keyferry \(arguments.joined(separator: " ")) failed during the benchmark.") }
    }
}
