import Foundation
import KeychainModel
import KeyferrySystem
import NodeControl

/// A Keyferry process that outlives the command that starts it (a node, a relay): started with
/// its standard error appended to its log, waited for until it answers, and stopped with
/// SIGTERM, then SIGKILL.
enum Daemon {
    /// This process's environment, for a daemon: should it trap, Swift's backtracer writes no
    /// register dumps into its log, where they would show 16 bytes of memory at each register
    /// (secrets, in a node). KEYFERRY_DEBUG_CRASHES=1 leaves the backtracer as it is.
    static func environment() -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        guard environment["KEYFERRY_DEBUG_CRASHES"] != "1" else { return environment }
        let chosen = environment["SWIFT_BACKTRACE"].map { $0.isEmpty ? "" : $0 + "," } ?? ""
        environment["SWIFT_BACKTRACE"] = chosen + "registers=none"
        return environment
    }

    /// Runs `executable ARGUMENTS` in the background and polls `ready` until it gives a value.
    /// A process that exits first, or one still not ready at `timeout`, fails with what it
    /// wrote to `log` meanwhile; on any failure, cancellation included, the process goes too
    /// (a later stop would miss one that had not taken its lock yet).
    static func launch<Answer>(
        _ executable: URL, _ arguments: [String], log: URL, name: String, timeout: Duration,
        ready: () async -> Answer?
    ) async throws -> Answer {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.environment = environment()
        // Into its log, appended to as its own logger does, so neither overwrites the other's
        // lines: a pipe would outlive whoever started it.
        let handle: FileHandle
        do {
            handle = try FileHandle.appending(to: log)
        } catch {
            throw NodeError(error)
        }
        let logStart = Int(try handle.seekToEnd())
        process.standardError = handle
        do {
            try process.run()
        } catch {
            throw NodeError(.launchFailed, "cannot run \(executable.path): \(error.localizedDescription).")
        }
        let deadline = ContinuousClock.now + timeout
        do {
            while ContinuousClock.now < deadline {
                if let answer = await ready() { return answer }
                if !process.isRunning {
                    throw NodeError(.launchFailed, "\(name) stopped at once: \(said(in: log, since: logStart))")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw NodeError(.launchFailed, "\(name) did not answer within \(timeout); see \(log.path).")
        } catch {
            process.terminate()
            throw error
        }
    }

    /// Sends SIGTERM to `pid`, and SIGKILL if it is still `running` (or executing) at `timeout`;
    /// returns once it is neither.
    static func stop(_ pid: Int32, timeout: Duration, running: () -> Bool) async throws {
        ProcessControl.send(.terminate, to: pid)
        let deadline = ContinuousClock.now + timeout
        var killed = false
        // A process lets go of its lock a moment before it exits: stopped is gone.
        while running() || ProcessControl.isExecuting(pid) {
            if !killed, ContinuousClock.now >= deadline {
                ProcessControl.send(.kill, to: pid)
                killed = true
            } else if killed, ContinuousClock.now >= deadline + .seconds(2) {
                // Gone by now, though its lock may be the last thing the kernel drops.
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// What the process wrote to its log since `offset`: why it could not start.
    private static func said(in log: URL, since offset: Int) -> String {
        guard let data = FileManager.default.contents(atPath: log.path), data.count > offset else { return "no reason given." }
        let text = String(decoding: data.dropFirst(offset), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.hasPrefix("error: ") ? String(text.dropFirst(7)) : text
    }
}
