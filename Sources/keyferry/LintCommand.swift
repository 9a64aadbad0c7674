import ArgumentParser
import Foundation
import KeychainModel

/// `keyferry lint`: finds the files, has `keyferry-lint` (installed beside this binary, so that
/// this one does not carry the Swift parser) read them, and reports as the audit does.
struct LintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Find keychain traps in Swift sources before they run, with file, line and the fix.",
        usage: "keyferry lint <path> ... [--json]",
        discussion: """
            Reads each Swift file named, and every .swift file under each directory named (leaving \
            out hidden directories and .build), and reports the calls of Keychain Services written \
            the way `keyferry audit` records when they run: kSecAttrAccessible in a search, an add \
            without accessibility, the deprecated Always classes, a delete in the branch of a \
            -25308 read, synchronizable with ThisDeviceOnly, an add whose status is dropped with no \
            -25299 handling, a call on the main actor; and from the seeds' checklists, a secret in \
            UserDefaults, a credential in the source, a class-wide cleanup that leaves synced items. \
            A dictionary is followed within the function that builds it; one that comes from \
            elsewhere is left to the audit.

            Exit status: 0 when nothing is found, 1 when something is (for CI), 5 for a path that \
            does not exist, 6 when keyferry-lint is not installed beside keyferry.
            """)

    @Argument(help: "Swift files, or directories to search for them.") var paths: [String]
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if paths.isEmpty { throw ValidationError("Name at least one Swift file or directory.") }
    }

    func run() throws {
        let files = try Self.swiftFiles(paths)
        let findings = try Self.findings(in: files)
        if output.json {
            try printJSON(encodable: Report(files: files.count, findings: findings.map(Report.Entry.init)))
        } else {
            for finding in findings {
                let detail = finding.detail.map { " (\($0))" } ?? ""
                print(
                    "\(finding.file):\(finding.line):\(finding.column): \(finding.rule.title)\(detail) [\(finding.rule.name)]"
                        .escapingControlCharactersButNewlines)
                print("  \(finding.rule.why)")
            }
            let count = findings.count == 1 ? "1 keychain trap" : "\(findings.count) keychain traps"
            let scanned = files.count == 1 ? "1 file" : "\(files.count) files"
            print(findings.isEmpty ? "no keychain traps in \(scanned)." : "\(count) in \(scanned).")
        }
        if !findings.isEmpty { throw ExitCode.failure }
    }

    /// The Swift files the paths name, in the order given, each directory's in path order.
    static func swiftFiles(_ paths: [String]) throws -> [String] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw CommandFailure(.notFound, "\(path) does not exist.")
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let root = URL(fileURLWithPath: path).standardizedFileURL
            let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
            var found: [String] = []
            while let url = walk?.nextObject() as? URL {
                if url.lastPathComponent.hasPrefix(".") {
                    walk?.skipDescendants()
                } else if url.pathExtension == "swift" {
                    let inside = url.standardizedFileURL.path.dropFirst(root.path.count).drop { $0 == "/" }
                    found.append(path.hasSuffix("/") ? path + inside : path + "/" + inside)
                }
            }
            files += found.sorted()
        }
        return files
    }

    /// Runs `keyferry-lint` on the files: their paths on its standard input, its findings
    /// (JSON) on its standard output.
    static func findings(in files: [String]) throws -> [LintFinding] {
        guard !files.isEmpty else { return [] }
        let process = Process()
        process.executableURL = try parser()
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        // Paths go in from a thread of their own: a long list would fill the pipe while the
        // parser's findings fill the other one.
        let paths = files.joined(separator: "\n") + "\n"
        let writer = Thread {
            input.fileHandleForWriting.write(Data(paths.utf8))
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CommandFailure("keyferry-lint stopped with status \(process.terminationStatus) (its message is above).")
        }
        do {
            return try JSONDecoder().decode([LintFinding].self, from: data)
        } catch {
            throw CommandFailure("keyferry-lint answered what is not a list of findings: \(error).")
        }
    }

    /// `keyferry-lint` beside this binary, as scripts/install puts it, else on PATH.
    static func parser() throws -> URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates =
            [Bundle.main.executableURL?.resolvingSymlinksInPath().deletingLastPathComponent(), beside].compactMap { $0 }
            + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { URL(fileURLWithPath: String($0)) }
        for directory in candidates {
            let url = directory.appendingPathComponent("keyferry-lint")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw CommandFailure(
            .unavailable, "keyferry lint needs keyferry-lint, which is not beside keyferry or on PATH; scripts/install installs both.")
    }

    struct Report: Encodable {
        struct Entry: Encodable {
            var rule: String
            var title: String
            var why: String
            var file: String
            var line: Int
            var column: Int
            var detail: String?

            init(_ finding: LintFinding) {
                rule = finding.rule.name
                title = finding.rule.title
                why = finding.rule.why
                file = finding.file
                line = finding.line
                column = finding.column
                detail = finding.detail
            }
        }

        var files: Int
        var findings: [Entry]
    }
}
