import Foundation
import KeychainTesting
import Testing

/// Every command block of the README and the guides in `docs/` runs as written, against the
/// binary users install, so that a page cannot drift from the program.
///
/// A page is a session: its blocks run in order in one shell, in a directory of their own with
/// `keyferry` first on the `PATH` and `Peers/` beside them.
/// - A `console` block is commands (`$ ` lines, `\` continuing them) each followed by the
///   output it must print, standard output and error together; `...` stands for any text within
///   a line, and a line of `...` alone for any lines. `[exit N]` after the output says the
///   command fails with status N; otherwise it must succeed. A command followed by no output
///   has its output unchecked.
/// - A `sh` block is commands that must each succeed, their output unchecked.
/// - A block introduced by a line "`PATH`:" is a file, written at PATH before the blocks after
///   it run (a scenario file, a user's `Package.swift`).
/// - A block after `<!-- not run: REASON -->` is not run (a real iPhone's backup, another
///   machine); the reason is the page's promise that it cannot be.
@Suite("the README and the guides run as written", .serialized, .blocking)
struct DocumentationTests {
    static let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var pages: [String] {
        let guides = (try? FileManager.default.contentsOfDirectory(atPath: checkout.appendingPathComponent("docs").path)) ?? []
        return ["README.md"] + guides.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    }

    @Test("each page's commands print what it shows", arguments: pages)
    func page(_ page: String) throws {
        let text = try String(contentsOf: Self.checkout.appendingPathComponent(page), encoding: .utf8)
        let parsed = try DocumentedPage(text, name: page)
        let run = try PageRun(parsed, binary: try CLI.locateBinary(), peers: Self.checkout.appendingPathComponent("Peers"))
        defer { run.cleanUp() }
        let results = try run.execute()
        for (command, result) in zip(parsed.commands, results) {
            let where_ = "\(page):\(command.line): \(command.text)"
            guard result.status == command.exit else {
                Issue.record("\(where_)\nexited \(result.status), not \(command.exit); it printed:\n\(result.output)")
                return
            }
            if let expected = command.expected, !OutputPattern.matches(expected, result.lines) {
                Issue.record("\(where_)\nprinted:\n\(result.output)\nwhere the page shows:\n\(expected.joined(separator: "\n"))")
            }
        }
        #expect(results.count == parsed.commands.count, "\(page): \(results.count) of \(parsed.commands.count) commands ran")
    }

    @Test("every link between pages leads to a file, and to a heading it names", arguments: pages)
    func links(_ page: String) throws {
        let url = Self.checkout.appendingPathComponent(page)
        let text = try String(contentsOf: url, encoding: .utf8)
        for link in text.matches(of: /\]\(([^)\s]+)\)/).map({ String($0.1) }) where !link.contains("://") {
            let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let target = parts[0].isEmpty ? url : url.deletingLastPathComponent().appendingPathComponent(parts[0]).standardizedFileURL
            #expect(FileManager.default.fileExists(atPath: target.path), "\(page): \(link) leads nowhere")
            guard parts.count == 2, let headings = try? String(contentsOf: target, encoding: .utf8) else { continue }
            let anchors = headings.components(separatedBy: "\n").filter { $0.hasPrefix("#") }.map(Self.anchor)
            #expect(anchors.contains(parts[1]), "\(page): \(link) names no heading of \(parts[0].isEmpty ? page : parts[0])")
        }
    }

    /// A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces as `-`.
    static func anchor(_ heading: String) -> String {
        let title = heading.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
        return String(title.compactMap { $0 == " " ? "-" : ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : nil })
    }

    @Test("the page format: output, exits, files and blocks not run")
    func format() throws {
        let page = try DocumentedPage(
            """
            `a.txt`:

            ```
            hello
            ```

            ```console
            $ cat a.txt
            hello
            $ printf 'x\\n' \\
                && false
            x
            [exit 1]
            ```

            <!-- not run: needs a phone -->
            ```sh
            keyferry restore ~/phone
            ```

            ```sh
            true   # fine
            ```
            """, name: "t.md")
        #expect(page.files.map(\.path) == ["a.txt"])
        #expect(page.commands.map(\.text) == ["cat a.txt", "printf 'x\\n' \\\n    && false", "true   # fine"])
        #expect(page.commands.map(\.exit) == [0, 1, 0])
        #expect(page.commands.map(\.expected) == [["hello"], ["x"], nil])
        #expect(page.notRun == ["needs a phone"])
        #expect(throws: DocumentedPage.Malformed.self) { try DocumentedPage("```console\nls\n```\n", name: "bad.md") }

        #expect(OutputPattern.matches(["a ... c", "...", "end"], ["a b c", "x", "y", "end"]))
        #expect(OutputPattern.matches(["...", "end"], ["end"]))
        #expect(!OutputPattern.matches(["a ... c"], ["a b d"]))
        #expect(!OutputPattern.matches(["one"], ["one", "two"]))
    }
}

/// A markdown page's runnable parts, in order.
struct DocumentedPage {
    struct Command {
        var line: Int
        var text: String
        var expected: [String]?
        var exit: Int32 = 0
    }

    enum Part {
        case command(Command)
        case file(path: String, text: String)
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    var parts: [Part] = []
    var notRun: [String] = []
    var commands: [Command] { parts.compactMap { if case .command(let command) = $0 { command } else { nil } } }
    var files: [(path: String, text: String)] { parts.compactMap { if case .file(let path, let text) = $0 { (path, text) } else { nil } } }

    init(_ text: String, name: String) throws {
        let lines = text.components(separatedBy: "\n")
        var index = 0
        var lastProse = ""
        while index < lines.count {
            let line = lines[index]
            guard line.hasPrefix("```") else {
                if !line.trimmingCharacters(in: .whitespaces).isEmpty { lastProse = line }
                index += 1
                continue
            }
            let language = String(line.dropFirst(3)).trimmingCharacters(in: .whitespaces)
            let start = index + 1
            var end = start
            while end < lines.count, lines[end] != "```" { end += 1 }
            guard end < lines.count else { throw Malformed(description: "\(name):\(index + 1): a block that never ends") }
            let body = Array(lines[start..<end])
            if let reason = lastProse.firstMatch(of: /^<!-- not run: (.+) -->$/) {
                notRun.append(String(reason.1))
            } else if let path = lastProse.firstMatch(of: /^`([^`]+)`:$/), language != "console", language != "sh" {
                parts.append(.file(path: String(path.1), text: body.joined(separator: "\n") + "\n"))
            } else if language == "console" {
                parts += try Self.console(body, firstLine: start + 1, name: name).map(Part.command)
            } else if language == "sh" {
                parts += Self.joined(body, firstLine: start + 1).filter { !$0.text.hasPrefix("#") }.map {
                    .command(Command(line: $0.line, text: $0.text, expected: nil))
                }
            }
            lastProse = ""
            index = end + 1
        }
    }

    /// Lines with `\` continuations joined into one command each, blank lines dropped.
    private static func joined(_ body: [String], firstLine: Int) -> [(line: Int, text: String)] {
        var commands: [(Int, String)] = []
        var pending: (Int, [String])?
        for (offset, line) in body.enumerated() {
            if var open = pending {
                open.1.append(line)
                pending = line.hasSuffix("\\") ? open : nil
                if pending == nil { commands.append((open.0, open.1.joined(separator: "\n"))) }
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                if line.hasSuffix("\\") { pending = (firstLine + offset, [line]) } else { commands.append((firstLine + offset, line)) }
            }
        }
        return commands
    }

    private static func console(_ body: [String], firstLine: Int, name: String) throws -> [Command] {
        var commands: [Command] = []
        var index = 0
        while index < body.count {
            let line = body[index]
            guard line.hasPrefix("$ ") else {
                if line.isEmpty {
                    index += 1
                    continue
                }
                throw Malformed(description: "\(name):\(firstLine + index): output before any `$ ` command")
            }
            var text = [String(line.dropFirst(2))]
            let number = firstLine + index
            index += 1
            while text.last!.hasSuffix("\\"), index < body.count {
                text.append(body[index])
                index += 1
            }
            var output: [String] = []
            var exit: Int32 = 0
            while index < body.count, !body[index].hasPrefix("$ ") {
                if let status = body[index].firstMatch(of: /^\[exit (\d+)\]$/) {
                    exit = Int32(status.1)!
                } else {
                    output.append(String(body[index].reversed().drop(while: \.isWhitespace).reversed()))
                }
                index += 1
            }
            while output.last?.isEmpty == true { output.removeLast() }
            commands.append(Command(line: number, text: text.joined(separator: "\n"), expected: output.isEmpty ? nil : output, exit: exit))
        }
        return commands
    }
}

/// Output as a page shows it: `...` within a line stands for any text, and alone for any lines.
enum OutputPattern {
    static func matches(_ expected: [String], _ actual: [String]) -> Bool {
        guard let first = expected.first else { return actual.isEmpty }
        if first == "..." {
            return (0...actual.count).contains { matches(Array(expected.dropFirst()), Array(actual.dropFirst($0))) }
        }
        guard let line = actual.first, lineMatches(first, line) else { return false }
        return matches(Array(expected.dropFirst()), Array(actual.dropFirst()))
    }

    static func lineMatches(_ pattern: String, _ line: String) -> Bool {
        let pieces = pattern.components(separatedBy: "...")
        guard pieces.count > 1 else { return pattern == line }
        guard line.hasPrefix(pieces[0]) else { return false }
        var rest = line.dropFirst(pieces[0].count)
        for piece in pieces.dropFirst().dropLast() {
            guard let found = rest.range(of: piece) else { return false }
            rest = rest[found.upperBound...]
        }
        return rest.hasSuffix(pieces.last!)
    }
}

/// One page run in one shell, in a scratch directory, each command's output and status kept.
final class PageRun {
    struct Result {
        var status: Int32
        var output: String
        var lines: [String] {
            var lines = output.components(separatedBy: "\n").map { String($0.reversed().drop(while: \.isWhitespace).reversed()) }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
    }

    let page: DocumentedPage
    let binary: URL
    let root: URL
    var work: URL { root.appendingPathComponent("work") }
    var results: URL { root.appendingPathComponent("results") }

    init(_ page: DocumentedPage, binary: URL, peers: URL) throws {
        self.page = page
        self.binary = binary
        root = URL(fileURLWithPath: "/tmp").appendingPathComponent("kf-doc-\(UUID().uuidString.prefix(8))")
        for directory in [work, results, root.appendingPathComponent("state")] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(at: work.appendingPathComponent("Peers"), withDestinationURL: peers)
    }

    /// Runs the page's parts in order, up to the first command that exits other than as shown.
    func execute() throws -> [Result] {
        var script = "cd \(quoted(work.path)) || exit 99\nexec </dev/null\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n"
        var number = 0
        for part in page.parts {
            switch part {
            case .file(let path, let text):
                script += "mkdir -p \"$(dirname \(quoted(path)))\" && cat > \(quoted(path)) <<'KEYFERRY_PAGE_FILE'\n\(text)KEYFERRY_PAGE_FILE\n"
            case .command(let command):
                let out = results.appendingPathComponent("\(number)").path
                script += "{ \(command.text)\n} > \(quoted(out + ".out")) 2>&1\necho $? > \(quoted(out + ".status"))\n"
                script += "[ \"$(cat \(quoted(out + ".status")))\" = \(command.exit) ] || exit 0\n"
                number += 1
            }
        }
        let file = root.appendingPathComponent("page.sh")
        try Data(script.utf8).write(to: file)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        // A page that hangs fails rather than stopping the suite.
        process.arguments = ["900", "bash", file.path]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = binary.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["XDG_STATE_HOME"] = root.appendingPathComponent("state").path
        environment["KEYFERRY_BACKUP_PASSWORD"] = nil
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        exited.wait()

        return (0..<number).compactMap { index in
            let base = results.appendingPathComponent("\(index)").path
            guard let status = try? String(contentsOfFile: base + ".status", encoding: .utf8),
                let code = Int32(status.trimmingCharacters(in: .whitespacesAndNewlines))
            else { return nil }
            let output = (try? Data(contentsOf: URL(fileURLWithPath: base + ".out"))).map { String(decoding: $0, as: UTF8.self) } ?? ""
            return Result(status: code, output: output)
        }
    }

    /// Stops every node and relay the page left running under its directory, then removes it.
    func cleanUp() {
        let found = FileManager.default.enumerator(atPath: root.path)
        var nodes: [String] = []
        var relays: [String] = []
        while let path = found?.nextObject() as? String {
            if path.hasSuffix("/node.sock") || path == "node.sock" { nodes.append(root.appendingPathComponent(path).deletingLastPathComponent().path) }
            if path.hasSuffix("/relay.lock") || path == "relay.lock" { relays.append(root.appendingPathComponent(path).deletingLastPathComponent().path) }
        }
        for node in nodes { run(["node", "stop", node]) }
        for relay in relays { run(["relay", "stop", "--data", relay]) }
        try? FileManager.default.removeItem(at: root)
    }

    private func run(_ arguments: [String]) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return }
        process.waitUntilExit()
    }

    private func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
