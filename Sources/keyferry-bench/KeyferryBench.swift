import ArgumentParser
import Foundation

@main
struct KeyferryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyferry-bench",
        abstract: "Measure Keyferry against floors and peers measured in the same run on this machine.",
        discussion: """
            Build in release and run through scripts/bench, which builds the keyferry binary the \
            process-level benchmarks start (KEYFERRY_BINARY names it).
            """,
        subcommands: [
            StoreBench.self, NodeBench.self, BackupBench.self, PhoneBackupBench.self, SyncBench.self, RelaysBench.self, CompactionBench.self,
            SoakBench.self, SurvivalBench.self, SecurityBench.self, ScaleBench.self,
        ])
}

/// The `keyferry` binary that benchmarks of whole commands and of nodes run.
enum KeyferryBinary {
    static let variable = "KEYFERRY_BINARY"

    static func url() throws -> URL {
        guard let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty else {
            throw CommandFailure("\(variable) must name the keyferry binary to measure; scripts/bench builds it and sets it.")
        }
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw CommandFailure("\(variable) names \(path), which is not an executable file.")
        }
        return URL(fileURLWithPath: path)
    }
}

struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Figures as JSON, keys sorted.
func printJSON(_ value: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data("null".utf8)
    print(String(decoding: data, as: UTF8.self))
}

func printJSON(encodable value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

extension String {
    func padded(_ width: Int) -> String { count >= width ? self : padding(toLength: width, withPad: " ", startingAt: 0) }
    func leftPadded(to width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

/// Blocking work (Keychain Services calls wait on their caller's thread) on a thread of its own,
/// never on the cooperative pool.
func onThread<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Swift.Result { try work() }) }.start()
    }
}

/// Keyferry's run, then the peer's; the other way round on odd runs, so that the machine's
/// drift falls on both alike.
func alternating(_ run: Int, _ keyferry: () throws -> Void, _ peer: () throws -> Void) rethrows {
    if run % 2 == 0 {
        try keyferry()
        try peer()
    } else {
        try peer()
        try keyferry()
    }
}

/// The middle sample (the upper one of an even count).
func median(_ samples: [Double]) -> Double { samples.sorted()[samples.count / 2] }

extension Duration {
    /// The duration in seconds, as the figures print them.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Runs a program as `runQuietly` does, through GNU time when it is installed (scripts/bench
/// installs it): how long it took, and the most memory it held (peak resident set, in bytes).
func measuredRun(_ executable: URL, _ arguments: [String]) throws -> (seconds: Double, peakBytes: Int?) {
    let time = URL(fileURLWithPath: "/usr/bin/time")
    guard FileManager.default.isExecutableFile(atPath: time.path) else {
        return (try seconds { try runQuietly(executable, arguments) }, nil)
    }
    let report = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-bench-time-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: report) }
    let elapsed = try seconds { try runQuietly(time, ["-o", report.path, "-f", "%M", executable.path] + arguments) }
    let kilobytes = try String(contentsOf: report, encoding: .utf8).split(separator: "\n").last.flatMap { Int($0) }
    return (elapsed, kilobytes.map { $0 * 1024 })
}

/// How long `body` takes, in seconds.
func seconds(_ body: () throws -> Void) throws -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// Runs a program with its output discarded and fails unless it succeeds. Waits through the
/// termination handler: `waitUntilExit` polls every 50 ms on Linux, which would swamp what a
/// benchmark measures.
func runQuietly(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    exited.wait()
    guard process.terminationStatus == 0 else {
        throw CommandFailure("\(executable.lastPathComponent) \(arguments.joined(separator: " ")) failed during the benchmark.")
    }
}
