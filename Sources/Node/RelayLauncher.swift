package import Foundation
import KeychainModel
package import KeyferrySystem
import NodeControl
package import Relay

/// Starts and stops a relay in the background (`keyferry relay serve --detach`), as a fleet
/// that syncs needs one. The relay says where it listens in `DATA/relay.json`.
package enum RelayLauncher {
    /// The URL of the relay running on `data`, if one is: its announcement counts only while
    /// its lock is held, so a relay killed outright is never taken for a live one.
    package static func running(data: URL) -> URL? {
        guard ProcessLock.isHeld(lockFile(data)), let announced = RelayAnnouncement.read(from: data) else { return nil }
        return URL(string: announced.url)
    }

    /// Held by the relay serving `data` for its life (`relay serve`): a second relay on the
    /// same data is refused, and a launcher signals only the process that holds it.
    package static func holdServingLock(data: URL) throws -> ProcessLock {
        let held: ProcessLock?
        do {
            held = try ProcessLock.acquire(lockFile(data))
        } catch {
            throw NodeError(error)
        }
        guard let lock = held else {
            let who = RelayAnnouncement.read(from: data).map { " (\($0.url), pid \($0.pid))" } ?? ""
            throw NodeError(.alreadyRunning, "a relay already serves \(data.path)\(who); stop it first, or serve another data directory.")
        }
        return lock
    }

    private static func lockFile(_ data: URL) -> URL { data.appendingPathComponent("relay.lock") }

    /// Starts a relay on `data` listening on `listen`, unless one runs there already, and
    /// returns its URL once it is up.
    package static func start(
        data: URL, listen: RelayAddress, executable: URL = NodeLauncher.currentExecutable,
        timeout: Duration = .seconds(20)
    ) async throws -> URL {
        if let url = running(data: data) { return url }
        // Left by a relay that was killed.
        try? FileManager.default.removeItem(at: RelayAnnouncement.file(in: data))
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        return try await Daemon.launch(
            executable, ["relay", "serve", "--detach", "--data", data.path, "--listen", listen.description],
            log: data.appendingPathComponent("relay.log"), name: "the relay for \(data.path)", timeout: timeout
        ) { running(data: data) }
    }

    /// Stops the relay running on `data` (SIGTERM, then SIGKILL) and waits until it is gone.
    /// Returns false when none was running.
    @discardableResult
    package static func stop(data: URL, timeout: Duration = .seconds(10)) async throws -> Bool {
        guard ProcessLock.isHeld(lockFile(data)), let announced = RelayAnnouncement.read(from: data) else { return false }
        try await Daemon.stop(announced.pid, timeout: timeout) { ProcessLock.isHeld(lockFile(data)) }
        try? FileManager.default.removeItem(at: RelayAnnouncement.file(in: data))
        return true
    }
}
