import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferryThreads
import Node
import NodeControl
import SyncWire

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
                While the relay cannot be reached, this keeps trying for up to --timeout seconds (saying on \
                stderr what it waits for), then fails. Nothing is lost: the node keeps its writes and syncs \
                on its own once the relay is back.
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(help: "Seconds to wait for the relay before giving up.") var timeout: Double = 30
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard timeout > 0, timeout.isFinite else { throw ValidationError("--timeout takes a number of seconds above 0.") }
        }

        func run() async throws {
            let limit = timeout
            // The node asks the relay again until --timeout; this waits a little longer for its answer.
            let client = NodeClient(directory: device.url, timeout: .seconds(limit + 15))
            // Ctrl-C stops the wait and says so; the node keeps its writes either way.
            let report = try await interruptibly {
                try await withThrowingTaskGroup(of: SyncReport?.self) { group in
                    group.addTask { try await client.call(.syncNow, NodeAPI.SyncNow(timeout: .seconds(limit))) }
                    group.addTask {
                        // A pass takes well under a second while the relay answers: say what a longer wait is for.
                        try await Task.sleep(for: .seconds(min(2, limit)))
                        printError("waiting for the relay (up to \(Int(limit.rounded(.up))) s; --timeout changes it) ...")
                        return nil
                    }
                    defer { group.cancelAll() }
                    while let answer = try await group.next() {
                        if let report = answer { return report }
                    }
                    throw CancellationError()
                }
            }
            if output.json { return try printJSON(encodable: report) }
            say(
                "pushed \(report.pushed), applied \(report.applied), superseded \(report.superseded)"
                    + (report.waitingForUnlock > 0 ? ", \(report.waitingForUnlock) received waiting for unlock" : "")
                    + (report.waitingToPush > 0 ? ", \(report.waitingToPush) to push at unlock" : "")
                    + (report.keptDeviceBound > 0 ? ", \(report.keptDeviceBound) not written over a ThisDeviceOnly item of the same key" : "")
                    + (report.rejectedCount == 0 ? "" : ", \(report.rejectedCount) refused")
                    + (report.resynced
                        ? "; resynced: the relay had let go of deletions this device missed while away, "
                            + "so it read everything again and deleted \(report.forgottenInResync.items) here" : "")
                    + (report.more ? "; more is waiting on the relay (the node goes on at once)" : ""))
            for reason in report.rejected { print("  refused: \(reason)") }
            for item in report.damaged { print("  not pushed, damaged: \(item)") }
            if report.rejectedCount > report.rejected.count { print("  and \(report.rejectedCount - report.rejected.count) more refused") }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Peers, the last exchange, what is pending, and what stays on this device; of a powered-off device, what it remembers.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let status = try await device.client.syncStatus()
            if output.json { return try printJSON(encodable: status) }
            guard let circle = status.circle else { return print("in no circle") }
            print("circle \(circle): \(status.members.map(\.name.escapingControlCharacters).joined(separator: ", "))")
            if status.sealedUntilUnlock == true { print("sealed until the device is first unlocked; it syncs from then on") }
            if status.poweredOff == true {
                print("powered off: no exchange until its node starts" + (status.lastChange.map { "; the last that moved something was \($0)" } ?? ""))
                print("pending: counted once its node starts (keyferry node start \(device.dir))")
            } else {
                let last =
                    status.lastExchange.map { "\($0)" }
                    ?? (status.lastChange.map { "none since the node started; the last that moved something was \($0)" } ?? "never")
                print("last exchange: \(last)" + (status.lastError.map { " (last attempt failed: \($0))" } ?? ""))
                print("pending: \(status.pending) to push, \(status.waitingForUnlock) waiting for unlock")
            }
            for item in status.skippedDeviceBound { print("skipped, device-bound: \(item)") }
            for author in status.received {
                let who = author.name ?? "a former member (\(author.signingKey.prefix(16))…)"
                let head = "received \(who)'s batches through #\(author.head) (\(author.headDigest.prefix(16))…)"
                print(
                    author.missing.isEmpty
                        ? head
                        : "\(head); MISSING \(author.missing.map { "#\($0)" }.joined(separator: ", ")): the relay withheld them from this device, or lost them")
            }
        }
    }
}
