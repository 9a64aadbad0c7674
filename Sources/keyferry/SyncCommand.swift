import ArgumentParser
import Foundation
import Node
import Sync

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Exchange items with the circle now, or see how syncing goes.",
        discussion: "A node in a circle also syncs on its own every second while it runs, backing off while the relay is down.",
        subcommands: [Now.self, Status.self])

    struct Now: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "now", abstract: "Push this node's writes and pull the others' until it is current.",
            discussion: """
                While the relay cannot be reached, each request keeps trying for up to 30 seconds before this fails. \
                Nothing is lost: the node keeps its writes and syncs on its own once the relay is back.
                """)
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: JSONFlag

        func run() async throws {
            let report: SyncReport = try await device.client.call(.syncNow, NodeAPI.Empty())
            if output.json { return try printJSON(encodable: report) }
            print("pushed \(report.pushed), applied \(report.applied), superseded \(report.superseded)"
                  + (report.waitingForUnlock > 0 ? ", \(report.waitingForUnlock) received waiting for unlock" : "")
                  + (report.waitingToPush > 0 ? ", \(report.waitingToPush) to push at unlock" : "")
                  + (report.rejected.isEmpty ? "" : ", \(report.rejected.count) refused"))
            for reason in report.rejected { print("  refused: \(reason)") }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Peers, the last exchange, what is pending, and what stays on this device.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: JSONFlag

        func run() async throws {
            let status: NodeAPI.SyncStatus = try await device.client.get(.syncStatus)
            if output.json { return try printJSON(encodable: status) }
            guard let circle = status.circle else { return print("in no circle") }
            print("circle \(circle): \(status.members.map(\.name).joined(separator: ", "))")
            if status.sealedUntilUnlock == true { print("sealed until the device is first unlocked; it syncs from then on") }
            print("last exchange: \(status.lastExchange.map { "\($0)" } ?? "never")" + (status.lastError.map { " (last attempt failed: \($0))" } ?? ""))
            print("pending: \(status.pending) to push, \(status.waitingForUnlock) waiting for unlock")
            for item in status.skippedDeviceBound { print("skipped, device-bound: \(item)") }
        }
    }
}
