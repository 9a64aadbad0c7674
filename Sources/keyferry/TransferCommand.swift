import ArgumentParser
import Foundation
import KeychainModel
import NodeControl

struct TransferCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "Quick Start: move a running device's apps, sandboxes and migratable items onto another, powered-off device.",
        discussion: """
            As iOS's device-to-device transfer: every keychain item that may leave the device moves, \
            sealed in transit under a one-time key; ThisDeviceOnly items stay behind and are \
            reported, with why. The target keeps its own passcode (give it with --passcode-file) and is \
            rebuilt aside, then swapped in only when complete: any failure leaves it as it was.
            """)

    @Argument(help: "The device to move from (running and unlocked).", completion: .directory) var from: String
    @Option(help: "The device to move onto (another device, powered off).", completion: .directory) var to: String
    @OptionGroup var targetPasscode: PasscodeInput
    @OptionGroup var output: ReportOptions

    func run() async throws {
        let target = URL(fileURLWithPath: to).standardizedFileURL
        let passcode = try targetPasscode.readForTarget(to, verb: "transfer")
        let client = NodeClient(directory: URL(fileURLWithPath: from), timeout: .seconds(6 * 3600))
        let report: RestoreReport = try await interruptibly {
            try await client.call(.transfer, NodeAPI.Transfer(target: target.path, passcode: passcode))
        }
        if output.json {
            try printJSON(encodable: report)
            return
        }
        if Verbosity.current == .verbose { print(report.table(target: to, transfer: true)) } else { say(report.summary(target: to, transfer: true)) }
    }
}
