import Foundation
import KeychainStore
import KeyferrySystem
import NodeControl

/// Starts and stops node processes: `keyferry node start|stop DIR`.
public enum NodeLauncher {
    /// Launches `keyferry node run DIR` detached, and returns once it answers.
    /// `executable` is the keyferry binary to run (normally this one).
    public static func start(directory: URL, executable: URL = currentExecutable, timeout: Duration = .seconds(20)) async throws -> NodeAPI.NodeStatus {
        let paths = NodePaths(directory: directory)
        try Device.requireDevice(at: paths.directory)
        guard !NodeLock.isHeld(paths) else { throw NodeError.alreadyRunning(paths.directory) }
        try paths.requireSocketPathFits()
        let logStart = (try? FileManager.default.attributesOfItem(atPath: paths.log.path)[.size] as? Int) ?? 0
        let process = Process()
        process.executableURL = executable
        process.arguments = ["node", "run", "--detach", paths.directory.path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        // Appended to, as the node's own logger does: neither overwrites the other's lines.
        process.standardError = try Placement.appending(to: paths.log)
        do {
            try process.run()
        } catch {
            throw NodeError(.launchFailed, "cannot run \(executable.path): \(error.localizedDescription).")
        }
        // Asked every few milliseconds while it starts: a node that is not up yet must not hold
        // one probe for a whole call's timeout.
        let client = NodeClient(directory: directory, timeout: .seconds(2))
        let deadline = ContinuousClock.now + timeout
        do {
            while ContinuousClock.now < deadline {
                if let status = try? await client.status() { return status }
                if !process.isRunning {
                    throw NodeError(.launchFailed, "the node for \(paths.directory.path) stopped at once: \(logTail(paths, from: logStart))")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw NodeError(.launchFailed, "the node for \(paths.directory.path) did not answer within \(timeout); see \(paths.log.path).")
        } catch {
            // Cancelled (Ctrl-C on `fleet up`) or given up on: the half-started node goes too.
            // A later `stop` would miss it if it had not taken its lock yet.
            process.terminate()
            throw error
        }
    }

    /// Powers the node off (SIGTERM, then SIGKILL if it will not go) and waits until it is
    /// gone. Returns false when no node was running.
    @discardableResult
    public static func stop(directory: URL, timeout: Duration = .seconds(10)) async throws -> Bool {
        let paths = NodePaths(directory: directory)
        try Device.requireDevice(at: paths.directory)
        guard NodeLock.isHeld(paths) else { return false }
        let pid = try await NodeClient(directory: directory).status().pid
        ProcessControl.send(.terminate, to: pid)
        let deadline = ContinuousClock.now + timeout
        while ProcessControl.isAlive(pid) || NodeLock.isHeld(paths) {
            if ContinuousClock.now >= deadline {
                ProcessControl.send(.kill, to: pid)
                try await Task.sleep(for: .milliseconds(100))
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Runs `body` while holding the powered-off device, so that no node starts on it meanwhile
    /// (what a restore needs). Fails, doing nothing, when a node is running.
    public static func whilePoweredOff<T>(directory: URL, _ body: () throws -> T) throws -> T {
        let paths = NodePaths(directory: directory)
        try Device.requireDevice(at: paths.directory)
        let lock = try NodeLock.acquire(paths)
        defer { lock.release() }
        return try body()
    }

    /// The binary of this process.
    public static var currentExecutable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    }

    /// Called first thing by `keyferry node run --detach`: leaves the launching shell's
    /// session, so closing the terminal does not power the node off.
    public static func detach() { ProcessControl.detachFromTerminal() }

    /// What the node wrote to its log since `offset`: why it could not start.
    private static func logTail(_ paths: NodePaths, from offset: Int) -> String {
        guard let data = FileManager.default.contents(atPath: paths.log.path), data.count > offset else { return "no reason given." }
        return String(decoding: data.dropFirst(offset), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
