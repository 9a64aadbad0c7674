import ArgumentParser
import Foundation
import KeyferrySystem
import Node
import NodeControl
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
    @OptionGroup var passcodeInput: PasscodeInput
    @Option(help: "Also write the matrix as one self-contained HTML page to FILE.", completion: .file())
    var html: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        // Every path on a large device takes longer than a call's usual minute.
        let client = NodeClient(directory: device.url, timeout: .seconds(6 * 3600))
        let passcode = try passcodeInput.read()
        let line = ProgressLine()
        line.show("running \(SurvivalPath.allCases.count) paths on scratch devices ...")
        let matrix = try await interruptibly { try await client.survival(app: app, passcode: passcode) }
        line.clear()
        let replaced = html.map { FileManager.default.fileExists(atPath: $0) } ?? false
        if let html {
            do {
                try Data(matrix.html().utf8).write(to: URL(fileURLWithPath: html), options: .atomic)
            } catch {
                throw CommandFailure("cannot write \(html): \(userMessage(for: error).message)")
            }
        }
        if output.json {
            try printJSON(encodable: matrix)
            return
        }
        print(matrix.table(colored: ProcessControl.standardOutputIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil))
        if let html { say("\n\(replaced ? "replaced" : "wrote") \(html)") }
    }
}
