import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferrySecurity

struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "List the keychain traps your code fell into on a device, with file and line.",
        discussion: """
            Code that calls Keychain Services through KeyferrySecurity records, on the device it \
            runs against, every call written in a way that loses or exposes secrets on real phones: \
            kSecAttrAccessible in a search, an add without accessibility, the deprecated Always \
            classes, a delete right after a read that failed with -25308, synchronizable together \
            with ThisDeviceOnly, and an add that failed with -25299 and was never followed by an \
            update or delete. Each is listed once per place in the code, with how often it was hit \
            and why it is a trap.

            The records are in DIR/audit.jsonl. With --strict the command exits 1 when there is \
            any, for CI; --clear empties the log after listing it.
            """)

    @OptionGroup var device: DeviceDirectory
    @Flag(help: "Exit 1 when any trap is recorded.") var strict = false
    @Flag(help: "Empty the log after listing it.") var clear = false
    @OptionGroup var output: OutputOptions

    func run() throws {
        try DeviceLayout(root: device.url).requireDevice()
        let log = AuditLog(device: device.url)
        let report = try log.read()
        if clear { try log.clear() }
        if output.json {
            try printJSON(encodable: report)
        } else {
            print(Self.text(report, device: device.dir, cleared: clear))
        }
        if strict && !report.findings.isEmpty { throw ExitCode.failure }
    }

    static func text(_ report: AuditReport, device: String, cleared: Bool) -> String {
        var lines: [String] = []
        if report.findings.isEmpty {
            lines.append("no keychain traps recorded on \(device).")
        } else {
            let places = report.findings.count == 1 ? "1 place" : "\(report.findings.count) places"
            let calls = report.calls == 1 ? "1 call" : "\(report.calls) calls"
            lines.append("\(calls) fell into keychain traps at \(places) on \(device):")
            for finding in report.findings {
                lines.append("")
                lines.append(
                    "\(finding.file):\(finding.line): \(finding.title) (\(finding.function.rawValue), \(finding.count)x, \(finding.apps.joined(separator: ", ")))"
                )
                if let detail = finding.detail { lines.append("  \(detail)") }
                lines.append("  " + finding.why)
            }
        }
        if report.unreadableLines > 0 {
            lines.append("")
            lines.append("\(report.unreadableLines) line(s) of the log were not records and were skipped.")
        }
        if cleared { lines.append("the log is now empty.") }
        return lines.joined(separator: "\n")
    }
}
