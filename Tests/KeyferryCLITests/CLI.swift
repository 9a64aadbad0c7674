import Foundation
import KeyferrySystem
import Testing

/// Runs the built `keyferry` binary against devices in a temporary directory, and on the way
/// out stops every node those devices still run, whether the test passed or not.
final class CLI: @unchecked Sendable {
    struct Result {
        var status: Int32
        var stdout: Data
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }

        /// stdout as a JSON object or array.
        func json() throws -> Any { try JSONSerialization.jsonObject(with: stdout) }
        func object() throws -> [String: Any] { try #require(try json() as? [String: Any]) }
    }

    let root: URL
    let binary: URL
    /// Long-running commands started by `start`, terminated on the way out.
    private var servers: [(process: Process, pipes: [Pipe])] = []

    init() throws {
        root = URL(fileURLWithPath: "/tmp").appendingPathComponent("kf-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        binary = try Self.locateBinary()
    }

    deinit {
        for server in servers {
            if server.process.isRunning {
                server.process.terminate()
                server.process.waitUntilExit()
            }
            server.pipes.forEach { $0.closeBothEnds() }
        }
        // Every device directory under root whose node still holds its lock gets stopped.
        let devices = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        for name in devices where FileManager.default.fileExists(atPath: root.appendingPathComponent("\(name)/node.sock").path) {
            _ = try? run(["node", "stop", path(name)])
        }
        try? FileManager.default.removeItem(at: root)
    }

    /// `KEYFERRY_BIN`, the binary a user installs (scripts/test sets it to the one
    /// `scripts/install` builds); without it, the debug build beside the test bundle.
    static func locateBinary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["KEYFERRY_BIN"] { return URL(fileURLWithPath: path) }
        return try locateBuilt("keyferry")
    }

    /// An executable of this package that `swift build` put beside the test bundle.
    static func locateBuilt(_ name: String) throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        Issue.record("\(name) was not found beside \(CommandLine.arguments[0]); run `swift build` first.")
        throw CancellationError()
    }

    func path(_ device: String) -> String { root.appendingPathComponent(device).path }

    /// Where commands keep their state (remembered fleet roots, default fleet roots).
    var stateHome: URL { root.appendingPathComponent("state") }

    @discardableResult
    func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        // Hermetic: only the test's own password reaches the command, and fleets are
        // remembered under the test's root.
        var inherited = ProcessInfo.processInfo.environment
        inherited["KEYFERRY_BACKUP_PASSWORD"] = nil
        inherited["XDG_STATE_HOME"] = stateHome.path
        process.environment = inherited.merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        let input = stdin.map { _ in Pipe() }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input ?? FileHandle.nullDevice
        defer { [out, err, input].forEach { $0?.closeBothEnds() } }
        // Waiting through the termination handler: waitUntilExit polls every 50 ms on Linux.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if let stdin, let input {
            input.fileHandleForWriting.write(stdin)
            try input.fileHandleForWriting.close()
        }
        // Read both pipes before waiting, so a chatty command cannot fill one and block.
        let (stdout, stderr) = (out.fileHandleForReading.readDataToEndOfFile(), err.fileHandleForReading.readDataToEndOfFile())
        exited.wait()
        return Result(status: process.terminationStatus, stdout: stdout, stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Starts a command that serves until stopped (`relay serve`) and returns it with the first
    /// line it printed, once it has. It is terminated when this CLI goes, if not before.
    func start(_ arguments: [String]) throws -> (process: Process, firstLine: String) {
        let (process, out) = try launch(arguments, errors: nil)
        let line = Self.read(out) { $0.contains(UInt8(ascii: "\n")) }
        return (process, String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Starts a command and returns once its standard error has printed `marker` (or it has
    /// exited), for a test that acts while the command waits: the caller then waits for the
    /// process and reads its standard output. It is terminated when this CLI goes, if not before.
    func start(_ arguments: [String], whenItSays marker: String, environment: [String: String] = [:]) throws -> (process: Process, stdout: FileHandle) {
        let errors = Pipe()
        let (process, out) = try launch(arguments, errors: errors, environment: environment.merging(["XDG_STATE_HOME": stateHome.path]) { $1 })
        _ = Self.read(errors) { String(decoding: $0, as: UTF8.self).contains(marker) }
        // What it says later is read and dropped, so it never blocks on a full pipe.
        errors.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
        return (process, out.fileHandleForReading)
    }

    /// Runs a command until its standard error says `marker` (it is waiting on something),
    /// then interrupts it as Ctrl-C does, and returns how it ended.
    func interrupt(_ arguments: [String], onceItSays marker: String) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["XDG_STATE_HOME": stateHome.path]) { $1 }
        let out = Pipe()
        let err = Pipe()
        defer { [out, err].forEach { $0.closeBothEnds() } }
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let said = Self.read(err) { String(decoding: $0, as: UTF8.self).contains(marker) }
        if process.isRunning { ProcessControl.send(.interrupt, to: process.processIdentifier) }
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = said + err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: stdout, stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Runs the binary with its standard output on a pipe and its standard error on `errors`
    /// (or nowhere), remembered so that it is terminated when this CLI goes.
    private func launch(
        _ arguments: [String], errors: Pipe?, environment: [String: String] = [:]
    ) throws -> (process: Process, stdout: Pipe) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = errors ?? FileHandle.nullDevice
        try process.run()
        servers.append((process, [out] + (errors.map { [$0] } ?? [])))
        return (process, out)
    }

    /// What `pipe` gives until `enough` holds of it, or until it ends.
    private static func read(_ pipe: Pipe, until enough: (Data) -> Bool) -> Data {
        var data = Data()
        while !enough(data) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        return data
    }

    /// Runs and expects success, recording stderr when it fails.
    @discardableResult
    func ok(
        _ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Result {
        let result = try run(arguments, stdin: stdin, environment: environment)
        #expect(result.status == 0, "keyferry \(arguments.joined(separator: " ")) failed: \(result.stderr)", sourceLocation: sourceLocation)
        return result
    }

    /// A device with a node running, unlocked, and one app installed.
    func poweredDevice(
        _ name: String, passcode: String? = "123456", extra: [String] = [], app: String = "com.example.mail",
        team: String = "ABCDE12345"
    ) throws -> String {
        let dir = path(name)
        try ok(["device", "init", dir, "--name", name] + (passcode.map { ["--passcode", $0] } ?? []) + extra)
        try ok(["node", "start", dir])
        if let passcode { try ok(["device", "unlock", dir, "--passcode", passcode]) }
        try ok(["app", "install", dir, "--app", app, "--team", team])
        return dir
    }

    func status(_ dir: String) throws -> [String: Any] {
        try ok(["device", "status", dir, "--json"]).object()
    }
}

extension Pipe {
    /// A Pipe's descriptors outlive the process that used them unless closed: a suite of a
    /// thousand commands once held a thousand pipes open, and the test process crashed.
    func closeBothEnds() {
        fileHandleForReading.readabilityHandler = nil
        try? fileHandleForReading.close()
        try? fileHandleForWriting.close()
    }
}
