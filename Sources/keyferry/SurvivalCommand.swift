import ArgumentParser
import Backup
import Foundation
import Node
import Survival

struct SurvivalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "survival",
        abstract: "Show which of a device's secrets survive each path: a new phone, a restore, a passcode removal, a new face, an app transfer.",
        discussion: """
            Every keychain item, UserDefaults entry and sandbox file of the device, against every \
            path, each run for real on scratch devices: iCloud Keychain (a new device joins a circle \
            and syncs), encrypted and unencrypted backups restored onto a new device and onto this \
            one, Quick Start, the passcode removed, biometry re-enrolled, the app transferred to \
            another team, the app deleted and reinstalled, a read before first unlock, and one while \
            locked after the grace period. Each cell is kept, lost, or the status of the failed read, \
            and every loss says why. The device itself is left exactly as it was.

            Works on a running, unlocked node, and on a powered-off device (give --passcode when it \
            has one). The passcode, when given, also answers access-control prompts on the way; \
            without it, items that need it read as they do now.
            """)

    @OptionGroup var device: DeviceDirectory
    @Option(help: "Only the secrets this app can read: its access groups and its sandbox.", transform: Checked.bundleID)
    var app: String?
    @Option(help: "The device's passcode (needed for a powered-off device that has one).", transform: Checked.passcode)
    var passcode: String?
    @Option(help: "Also write the matrix as one self-contained HTML page to FILE.", completion: .file())
    var html: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        // Every path on a large device takes longer than a call's usual minute.
        let client = NodeClient(directory: device.url, timeout: .seconds(6 * 3600))
        if Verbosity.current >= .normal, ProcessControl.standardErrorIsTerminal {
            printError("running \(SurvivalPath.allCases.count) paths on scratch devices ...", newline: false)
        }
        let matrix = try await interruptibly { try await client.survival(app: app, passcode: passcode) }
        if Verbosity.current >= .normal, ProcessControl.standardErrorIsTerminal { printError("\u{1B}[2K\r", newline: false) }
        if let html {
            do {
                try Data(matrix.html().utf8).write(to: URL(fileURLWithPath: html), options: .atomic)
            } catch {
                throw CommandFailure("cannot write \(html): \(userMessage(for: error))")
            }
        }
        if output.json { try printJSON(encodable: matrix); return }
        print(matrix.table(colored: ProcessControl.standardOutputIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil))
        if let html { say("\nwrote \(html)") }
    }
}

struct TransferCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "Quick Start: move a running device's apps, sandboxes and migratable items onto another, powered-off device.",
        discussion: """
            As iOS's device-to-device transfer: every keychain item that may leave the device moves, \
            sealed in transit under a one-time key; ThisDeviceOnly items stay behind and are \
            reported, with why. The target keeps its own passcode (give it with --passcode) and is \
            rebuilt aside, then swapped in only when complete: any failure leaves it as it was.
            """)

    @Argument(help: "The device to move from (running and unlocked).", completion: .directory) var from: String
    @Option(help: "The device to move onto (another device, powered off).", completion: .directory) var to: String
    @Option(help: "The target device's passcode, when it has one.", transform: Checked.passcode) var passcode: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let target = URL(fileURLWithPath: to).standardizedFileURL
        let client = NodeClient(directory: URL(fileURLWithPath: from), timeout: .seconds(6 * 3600))
        let report: RestoreReport = try await interruptibly {
            try await client.call(.transfer, NodeAPI.Transfer(target: target.path, passcode: passcode))
        }
        if output.json { try printJSON(encodable: report); return }
        print(Verbosity.current == .verbose ? report.table(target: to, transfer: true) : report.summary(target: to, transfer: true))
    }
}
