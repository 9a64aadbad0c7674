import Foundation
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
}
