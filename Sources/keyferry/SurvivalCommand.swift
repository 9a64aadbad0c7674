import ArgumentParser
import Foundation
import KeychainModel
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

            With --compare simulator, the same secrets also run every path on the iOS Simulator \
            (a copy of the device that behaves as one: no keystore, no passcode, no iCloud \
            Keychain), and it lists every cell where the Simulator keeps a secret this device \
            loses or cannot read: the false passes of tests run on the Simulator alone.
            """)

    @OptionGroup var device: DeviceDirectory
    @Option(help: "Only the secrets this app can read: its access groups and its sandbox.", transform: Checked.bundleID)
    var app: String?
    @OptionGroup var passcodeInput: PasscodeInput
    @Option(help: "Also write the matrix as one self-contained HTML page to FILE.", completion: .file())
    var html: String?
    @Option(help: "Compare with another profile: simulator lists where the iOS Simulator passes and this device does not.")
    var compare: String?
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let compare {
            guard (try? DeviceProfile(named: compare)) == .simulator else {
                throw ValidationError("--compare takes simulator: the profile whose false passes to list.")
            }
            if html != nil { throw ValidationError("--html writes one matrix; leave it out with --compare (--json has both).") }
        }
    }

    func run() async throws {
        if compare != nil {
            let comparison = try await running("on this device and on the Simulator") { client, passcode in
                try await client.survivalAgainstSimulator(app: app, passcode: passcode)
            }
            if output.json { return try printJSON(encodable: comparison) }
            return print(comparison.table())
        }
        // Where the page goes is checked first: the matrix is the expensive part.
        if let html {
            let folder = URL(fileURLWithPath: html).deletingLastPathComponent().path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw CommandFailure(.notFound, "--html \(html): there is no directory \(folder) to write it in.")
            }
            guard FileManager.default.isWritableFile(atPath: folder) else { throw CommandFailure("--html \(html): \(folder) is not writable.") }
        }
        let matrix = try await running("on scratch devices") { client, passcode in try await client.survival(app: app, passcode: passcode) }
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

    /// Runs every path `where`, with a line saying so meanwhile; Ctrl-C stops it.
    private func running<Answer: Sendable>(
        _ where: String, _ work: @escaping @Sendable (NodeClient, String?) async throws -> Answer
    ) async throws -> Answer {
        // Every path on a large device takes longer than a call's usual minute.
        let client = NodeClient(directory: device.url, timeout: .seconds(6 * 3600))
        let passcode = try passcodeInput.read()
        let line = ProgressLine()
        line.show("running \(SurvivalPath.allCases.count) paths \(`where`) ...")
        let answer = try await interruptibly { try await work(client, passcode) }
        line.clear()
        return answer
    }
}
