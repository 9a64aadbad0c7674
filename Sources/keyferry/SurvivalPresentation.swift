import Foundation
import KeychainModel
import Survival

extension SurvivalMatrix {
    /// The reasons of the matrix, numbered in order of first appearance: a cell shows the number,
    /// the legend the sentence.
    var reasons: [String] {
        var seen: [String] = []
        for row in rows {
            for reason in ([row.now] + paths.map { row.cells[$0] }).compactMap({ $0?.reason }) where !seen.contains(reason) {
                seen.append(reason)
            }
        }
        return seen
    }

    /// A table: secrets down, paths across, each cell `kept`, `lost` or the failed read's
    /// status, with the number of its reason; then the reasons and the paths in words. Colored
    /// for a terminal.
    func table(colored: Bool) -> String {
        let reasons = reasons
        func text(_ cell: SurvivalCell?) -> String {
            guard let cell else { return "" }
            var text =
                switch cell.outcome {
                case .kept: "kept"
                case .lost: "lost"
                case .unreadable: cell.status.map { String($0.rawValue) } ?? "unreadable"
                }
            if let reason = cell.reason, let number = reasons.firstIndex(of: reason) { text += " \(number + 1)" }
            return text
        }
        func paint(_ text: String, _ cell: SurvivalCell?) -> String {
            guard colored, let cell else { return text }
            let code =
                switch cell.outcome {
                case .kept: "32"
                case .lost: "31"
                case .unreadable: "33"
                }
            return "\u{1B}[\(code)m\(text)\u{1B}[0m"
        }
        // A secret's name is its owner's attribute: shown escaped, never as terminal control.
        let names = rows.map(\.name.escapingControlCharacters)
        let nameWidth = max(6, names.map(\.count).max() ?? 0)
        let widths = paths.map { path in max(path.heading.count, rows.map { text($0.cells[path]).count }.max() ?? 0) }
        // A "now" column only when the device itself cannot read a secret: the baseline's failure.
        let nowWidth = rows.contains { $0.now != nil } ? max(3, rows.map { text($0.now).count }.max() ?? 0) : nil
        var lines = [
            "What survives on \(device.escapingControlCharacters)" + (app.map { " for \($0)" } ?? "") + ": each path run for real on scratch devices", "",
        ]
        let nowHeading = nowWidth.map { ["now".padded($0)] } ?? []
        lines.append((["secret".padded(nameWidth)] + nowHeading + zip(paths, widths).map { $0.heading.padded($1) }).joined(separator: "  "))
        for (row, name) in zip(rows, names) {
            let now = nowWidth.map { [paint((row.now.map(text) ?? "ok").padded($0), row.now)] } ?? []
            let cells = zip(paths, widths).map { path, width in paint(text(row.cells[path]).padded(width), row.cells[path]) }
            lines.append(([name.padded(nameWidth)] + now + cells).joined(separator: "  "))
        }
        if rows.isEmpty { lines.append("(no keychain item, UserDefaults entry or sandbox file)") }
        for item in damaged { lines.append("left out, damaged: \(item.escapingControlCharacters)") }
        if !reasons.isEmpty {
            lines += ["", "why:"]
            let width = String(reasons.count).count
            // Reasons read as one list: some come from an error's sentence, with its full stop.
            let shown = { (reason: String) in reason.hasSuffix(".") ? String(reason.dropLast()) : reason }
            lines += reasons.enumerated().map {
                "  \(String(repeating: " ", count: width - String($0.offset + 1).count))\($0.offset + 1)  \(shown($0.element.escapingControlCharacters))"
            }
        }
        // Each column's id too: what `expect-survival` and --json call it.
        lines += ["", "paths (column, id in scenarios and JSON, what it does):"]
        let headingWidth = SurvivalPath.allCases.map(\.heading.count).max() ?? 0
        let idWidth = SurvivalPath.allCases.map(\.rawValue.count).max() ?? 0
        lines += paths.map { "  \($0.heading.padded(headingWidth))  \($0.rawValue.padded(idWidth))  \($0.summary)" }
        for (path, why) in notRun.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append("  \(path.heading.padded(headingWidth))  \(path.rawValue.padded(idWidth))  not run: \(why)")
        }
        return lines.joined(separator: "\n")
    }

    /// One self-contained page (no network, no external assets): secrets down, paths across,
    /// colored by outcome, each reason on hover and in the legend below.
    func html() -> String {
        let reasons = reasons
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        var body = ""
        body += "<table id=\"matrix\">\n<thead><tr><th class=\"secret\">secret</th>"
        for path in paths { body += "<th title=\"\(escaped(path.summary))\">\(escaped(path.heading))</th>" }
        body += "</tr></thead>\n<tbody>\n"
        for row in rows {
            let detail = [
                row.app, row.itemClass, row.accessible, row.synchronizable.map { $0 ? "synchronizable" : nil } ?? nil,
                row.accessControl, row.fileProtection,
                row.now.map { "unreadable on this device now" + ($0.status.map { " (\($0.rawValue))" } ?? "") },
            ].compactMap { $0 }.joined(separator: " · ")
            body += "<tr><th class=\"secret\" title=\"\(escaped(detail))\">\(escaped(row.name))<small>\(escaped(detail))</small></th>"
            for path in paths {
                guard let cell = row.cells[path] else {
                    body += "<td></td>"
                    continue
                }
                let label =
                    switch cell.outcome {
                    case .kept: "kept"
                    case .lost: "lost"
                    case .unreadable: cell.status.map { String($0.rawValue) } ?? "unreadable"
                    }
                let number = cell.reason.flatMap { reasons.firstIndex(of: $0) }.map { "<sup>\($0 + 1)</sup>" } ?? ""
                let hover = ([path.summary, cell.status?.description, cell.reason].compactMap { $0 }).joined(separator: ": ")
                body += "<td class=\"\(cell.outcome.rawValue)\" data-path=\"\(path.rawValue)\" title=\"\(escaped(hover))\">\(escaped(label))\(number)</td>"
            }
            body += "</tr>\n"
        }
        body += "</tbody>\n</table>\n"
        body +=
            "<section class=\"legend\"><h2>Outcomes</h2><p><span class=\"kept\">kept</span> still there with the same value · "
            + "<span class=\"lost\">lost</span> gone, or its value changed · "
            + "<span class=\"unreadable\">unreadable</span> still there, but the read fails with Apple's status</p>\n"
        if !reasons.isEmpty {
            body += "<h2>Why</h2><ol id=\"reasons\">"
            for reason in reasons { body += "<li>\(escaped(reason))</li>" }
            body += "</ol>\n"
        }
        body += "<h2>Paths</h2><dl id=\"paths\">"
        for path in paths { body += "<dt>\(escaped(path.heading))</dt><dd>\(escaped(path.summary))</dd>" }
        for (path, why) in notRun.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            body += "<dt>\(escaped(path.heading))</dt><dd>not run: \(escaped(why))</dd>"
        }
        body += "</dl></section>\n"
        let title = "What survives on \(device)" + (app.map { " for \($0)" } ?? "")
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escaped(title))</title>
            <style>
            body { font: 14px/1.4 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em; color: #1d1d1f; }
            h1 { font-size: 1.5em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
            table { border-collapse: separate; border-spacing: 3px; }
            th { font-weight: 600; padding: 4px 8px; white-space: nowrap; }
            th.secret { text-align: left; font-weight: 500; }
            th.secret small { display: block; color: #6e6e73; font-weight: 400; font-size: 0.8em; }
            td { padding: 6px 10px; border-radius: 6px; text-align: center; white-space: nowrap; cursor: help; }
            .kept { background: #d7f5dd; color: #0b6b1f; }
            .lost { background: #fddcdc; color: #a1120f; font-weight: 600; }
            .unreadable { background: #fff1c7; color: #7a5300; }
            .legend span { padding: 2px 8px; border-radius: 4px; }
            dt { float: left; clear: left; width: 7em; font-weight: 600; } dd { margin-left: 8em; }
            </style></head>
            <body>
            <h1>\(escaped(title))</h1>
            <p>Each path was run for real on scratch devices; the device itself was left as it was. Hover a cell for its reason.</p>
            \(body)</body></html>

            """
    }
}

extension SurvivalComparison {
    /// One line per false pass, what happens on each side; then what the Simulator cannot run.
    func table() -> String {
        func side(_ cell: SurvivalCell) -> String {
            switch cell.outcome {
            case .kept: "kept"
            case .lost: "lost" + (cell.reason.map { ": \($0)" } ?? "")
            case .unreadable: cell.reason ?? cell.status.map { "\($0.name) (\($0.rawValue))" } ?? "unreadable"
            }
        }
        let count = falsePasses.count == 1 ? "1 false pass" : "\(falsePasses.count) false passes"
        let verdict =
            falsePasses.isEmpty
            ? "no false passes: every secret the Simulator keeps, this device keeps too"
            : "\(count), where the Simulator keeps a secret this device does not"
        var lines = ["\(device.device) beside the iOS Simulator" + (device.app.map { " for \($0)" } ?? "") + ": " + verdict]
        let width = falsePasses.map(\.secret.escapingControlCharacters.count).max() ?? 0
        for pass in falsePasses {
            let name = pass.secret.escapingControlCharacters.padded(width)
            lines.append("  \(name)  \(pass.path.heading.padded(11))  here \(side(pass.device)); on the Simulator, kept")
        }
        // Paths the Simulator cannot run, one line per reason.
        var reasons: [(why: String, paths: [SurvivalPath])] = []
        for path in SurvivalPath.allCases {
            guard let why = simulator.notRun[path], device.notRun[path] == nil else { continue }
            if let index = reasons.firstIndex(where: { $0.why == why }) { reasons[index].paths.append(path) } else { reasons.append((why, [path])) }
        }
        for (why, paths) in reasons {
            let named = paths.count == 1 ? paths[0].summary : paths.map(\.heading).joined(separator: ", ")
            lines.append("  not on the Simulator: \(named) (\(why))")
        }
        return lines.joined(separator: "\n")
    }
}
