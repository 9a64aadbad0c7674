public import Foundation
import Testing

/// The programs nobody here wrote that check what Keyferry writes for outside readers: the
/// virtual environments of scripts/ios-readers (readers of iPhones' backups, and Python's
/// cryptography), installed on first use.
public enum OutsideReaders {
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The directory scripts/ios-readers prints: `tools/` and `mvt/`, each a virtual environment.
    public static func directory() throws -> URL {
        let process = Process()
        process.executableURL = packageRoot.appendingPathComponent("scripts/ios-readers")
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "scripts/ios-readers failed")
        return URL(fileURLWithPath: path)
    }

    /// The Python that has the pinned `cryptography`.
    public static func python() throws -> URL { try directory().appendingPathComponent("tools/bin/python") }

    /// Runs `script` with that Python and `arguments`, and returns the words it printed; fails
    /// the test when the script fails.
    public static func pythonWords(_ script: String, _ arguments: [String]) throws -> [String] {
        let process = Process()
        process.executableURL = try python()
        process.arguments = ["-c", script] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "the Python script failed")
        return printed.split(whereSeparator: \.isWhitespace).map(String.init)
    }
}
