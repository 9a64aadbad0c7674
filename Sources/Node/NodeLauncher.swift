package import Foundation
import KeychainModel
import KeyferrySystem
package import NodeControl

/// Starts and stops node processes: `keyferry node start|stop DIR`.
package enum NodeLauncher {
    /// Launches `keyferry node run DIR` detached, and returns once it answers.
    /// `executable` is the keyferry binary to run (normally this one).
    package static func start(directory: URL, executable: URL = currentExecutable, timeout: Duration = .seconds(20)) async throws -> NodeAPI.NodeStatus {
        let paths = NodePaths(directory: directory)
        try DeviceLayout(root: paths.directory).requireDevice()
        if paths.isHeld {
            // Held by a node, or by a command that restores or reads the device.
            throw (try? await NodeClient(directory: directory).status()) != nil ? NodeError.alreadyRunning(paths.directory) : DeviceError.inUse(paths.directory)
        }
        try paths.requireSocketPathFits()
        // Asked every few milliseconds while it starts: a node that is not up yet must not hold
        // one probe for a whole call's timeout.
        let client = NodeClient(directory: directory, timeout: .seconds(2))
        return try await Daemon.launch(
            executable, ["node", "run", "--detach", paths.directory.path], log: paths.log,
            name: "the node for \(paths.directory.path)", timeout: timeout
        ) { try? await client.status() }
    }

    /// Powers the node off (SIGTERM, then SIGKILL if it will not go) and waits until it is
    /// gone. Returns false when no node was running.
    @discardableResult
    package static func stop(directory: URL, timeout: Duration = .seconds(10)) async throws -> Bool {
        let paths = NodePaths(directory: directory)
        try DeviceLayout(root: paths.directory).requireDevice()
        guard paths.isHeld else { return false }
        let pid = try await NodeClient(directory: directory).status().pid
        try await Daemon.stop(pid, timeout: timeout) { paths.isHeld }
        return true
    }

    /// The binary of this process.
    package static var currentExecutable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    }

    /// Called first thing by `keyferry node run --detach`: leaves the launching shell's
    /// session, so closing the terminal does not power the node off.
    package static func detach() { ProcessControl.detachFromTerminal() }

}
