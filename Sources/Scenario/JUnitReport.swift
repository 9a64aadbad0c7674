import Foundation

/// Scenario results as JUnit XML, what common CI systems display: a test suite per file, a test
/// case per scenario, and for a failed one the step, what was expected and what came back.
package enum JUnitReport {
    package static func xml(_ results: [ScenarioResult]) -> String {
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>"]
        let failures = results.filter { !$0.passed }.count
        lines.append(
            "<testsuites name=\"keyferry scenarios\" tests=\"\(results.count)\" failures=\"\(failures)\" time=\"\(seconds(results.map(\.seconds).reduce(0, +)))\">"
        )
        for (file, group) in Dictionary(grouping: results, by: \.file).sorted(by: { $0.key < $1.key }) {
            let failed = group.filter { !$0.passed }.count
            lines.append(
                "  <testsuite name=\"\(escaped(file))\" tests=\"\(group.count)\" failures=\"\(failed)\" time=\"\(seconds(group.map(\.seconds).reduce(0, +)))\">"
            )
            for result in group {
                lines.append("    <testcase classname=\"\(escaped(file))\" name=\"\(escaped(result.name))\" time=\"\(seconds(result.seconds))\">")
                if let failure = result.failure {
                    let message = "line \(failure.line): \(failure.step): \(failure.failure ?? "failed")"
                    lines.append("      <failure message=\"\(escaped(message))\">\(escaped(message))</failure>")
                }
                let log = result.steps.map { "\($0.passed ? "ok  " : "FAIL") \($0.line): \($0.step)" }.joined(separator: "\n")
                lines.append("      <system-out>\(escaped((result.source.map { "source: \($0)\n" } ?? "") + log))</system-out>")
                lines.append("    </testcase>")
            }
            lines.append("  </testsuite>")
        }
        lines.append("</testsuites>")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func seconds(_ value: Double) -> String { String(format: "%.3f", value) }

    private static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\n", "\t": out.unicodeScalars.append(scalar)
            // XML 1.0 has no way to carry other control characters.
            case _ where scalar.value < 0x20: out += "?"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
