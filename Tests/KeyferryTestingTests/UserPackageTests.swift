import Foundation
import Testing

/// The README's "Your Swift code and tests on Linux CI", followed to the letter: its files written as it shows them,
/// its dependency pointed at this checkout (whatever the checkout's folder is called, which is
/// what `name: "Keyferry"` is for), and its tests run with `swift test`, as a user would.
@Suite("the README's own-package instructions", .serialized)
struct UserPackageTests {
    static let checkout = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the README's package builds against this checkout and its test passes")
    func readmePackage() throws {
        let section = try Self.section("## Your Swift code and tests on Linux CI")
        let files = Self.files(in: section)
        #expect(files.map(\.path).sorted() == ["Package.swift", "Sources/TokenStore/TokenStore.swift", "Tests/TokenStoreTests/TokenStoreTests.swift"])
        let manifest = try #require(files.first { $0.path == "Package.swift" }?.text)
        #expect(manifest.contains(#".package(name: "Keyferry", path: "../keyferry")"#), "the dependency the prose explains")

        // The system packages the section names are the ones this machine builds Keyferry with.
        let line = try #require(section.split(separator: "\n").first { $0.contains("apt-get install") })
        for package in ["libsodium-dev", "libzstd-dev", "libsqlite3-dev", "pkg-config"] {
            #expect(line.contains(package), "\(package) is named")
        }

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-user-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let package = root.appendingPathComponent("notes")
        for file in files {
            let url = package.appendingPathComponent(file.path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            // The one change a user makes: where their checkout is.
            let text = file.text.replacingOccurrences(of: #"path: "../keyferry""#, with: "path: \"\(Self.checkout.path)\"")
            try Data(text.utf8).write(to: url)
        }

        let (status, output) = try Self.swift(["test"], in: package)
        #expect(status == 0, "swift test failed:\n\(output.suffix(4000))")
        #expect(output.contains("theTokenOutlivesALockButWaitsForTheFirstUnlock") && output.contains("passed"), "\(output.suffix(2000))")
    }

    /// From `heading` to the next heading of its level or above.
    static func section(_ heading: String) throws -> String {
        let readme = try String(contentsOf: checkout.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "\n" + heading + "\n"))
        let rest = readme[start.upperBound...]
        let end = rest.range(of: #"\n#{2,3} "#, options: .regularExpression)?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }

    /// Each fenced block that a line "`PATH`:" introduces, as that file.
    static func files(in section: String) -> [(path: String, text: String)] {
        let lines = section.components(separatedBy: "\n")
        var files: [(String, String)] = []
        for (index, line) in lines.enumerated() where line.hasPrefix("`") && line.hasSuffix("`:") {
            guard index + 2 < lines.count, lines[index + 2].hasPrefix("```") else { continue }
            let body = lines[(index + 3)...].prefix { $0 != "```" }
            files.append((String(line.dropFirst().dropLast(2)), body.joined(separator: "\n") + "\n"))
        }
        return files
    }

    /// Runs `swift ARGUMENTS` in `directory` and waits for it, its output and errors together.
    static func swift(_ arguments: [String], in directory: URL) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift"] + arguments
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: bytes, as: UTF8.self))
    }
}
