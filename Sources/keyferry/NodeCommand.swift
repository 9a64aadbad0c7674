import ArgumentParser
import Foundation
import KeychainModel
import Node
import NodeControl

struct NodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Power a device on and off: a background process serving its control API.",
        discussion: """
            A node holds the device's class keys in memory only and answers on DIR/node.sock \
            (owner-only). It logs to DIR/node.log, never secrets. A node killed by any means \
            restarts before first unlock with every committed item intact.
            """,
        subcommands: [Start.self, Stop.self, Reboot.self, Status.self, Run.self])

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "start", abstract: "Power the device on; returns once the node answers.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // Nothing to do for a node that runs already, as stopping a stopped one is nothing.
            do {
                let status = try await NodeLauncher.start(directory: device.url)
                if output.json { try printJSON(encodable: status.device) } else { say("started (pid \(status.pid)): \(status.device.summary)") }
            } catch let error as NodeError where error.code == .alreadyRunning {
                let status = try await device.client.status()
                if output.json { try printJSON(encodable: status.device) } else { say("already running (pid \(status.pid)): \(status.device.summary)") }
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "stop", abstract: "Power the device off: every class key leaves memory.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let wasRunning = try await NodeLauncher.stop(directory: device.url)
            if output.json { printJSON(["stopped": wasRunning]) } else { say(wasRunning ? "stopped" : "not running") }
        }
    }

    struct Reboot: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "reboot", abstract: "Restart the device: back to before first unlock.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await device.send(.reboot, NodeAPI.Empty(), json: output.json)
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Show the node's process and its device.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // A stopped node is an answer, not a failure: "off", as `device status` says.
            do {
                let status = try await device.client.status()
                if output.json { try printJSON(encodable: status) } else { print("running (pid \(status.pid)): \(status.device.summary)") }
            } catch let error as NodeError where error.code == .notRunning {
                // A node that stops removes its socket: one left behind says the last run was cut.
                let cut = FileManager.default.fileExists(atPath: DeviceLayout(root: device.url).socket.path)
                let status = try await device.client.deviceStatus()
                if output.json {
                    try printJSON(encodable: Off(device: status, lastRunEndedUncleanly: cut))
                } else {
                    print("not running: \(status.summary)")
                    if cut { print("  its last run ended without a stop (killed or crashed); its log is \(DeviceLayout(root: device.url).log.path)") }
                }
            }
        }
    }

    /// `node status --json` of a powered-off device: no pid, the device as it is on disk.
    private struct Off: Encodable {
        var running = false
        var device: DeviceStatus
        var lastRunEndedUncleanly: Bool
    }

    /// What `start` launches in the background; run it by hand to keep a node in the foreground.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Run the node in the foreground until SIGTERM or SIGINT (what `start` launches).",
            shouldDisplay: false)
        @OptionGroup var device: DeviceDirectory
        @Flag(help: .hidden) var detach = false

        func run() async throws {
            if detach { NodeLauncher.detach() }
            try await NodeServer.run(directory: device.url)
        }
    }
}
