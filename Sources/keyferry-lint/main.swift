import Foundation
import KeychainLint
import KeychainModel

// The parser behind `keyferry lint`, a program of its own so that `keyferry` does not carry
// swift-syntax: it reads the paths of Swift files from standard input, one per line, and writes
// their findings as one JSON array (`LintFinding`). `keyferry lint` finds the files, runs this
// beside itself, and reports.
var findings: [LintFinding] = []
while let path = readLine(strippingNewline: true) {
    if path.isEmpty { continue }
    guard let data = FileManager.default.contents(atPath: path) else {
        FileHandle.standardError.write(Data("keyferry-lint: \(path) cannot be read.\n".utf8))
        exit(1)
    }
    findings += KeychainLinter.lint(source: String(decoding: data, as: UTF8.self), file: path)
}
FileHandle.standardOutput.write(try JSONEncoder().encode(findings))
