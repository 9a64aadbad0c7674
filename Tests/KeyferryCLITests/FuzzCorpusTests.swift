import Foundation
import KeychainTesting
import Testing

/// The fuzzers' seed corpus and the crashes they found, replayed through every reader on each
/// run: `keyferry-fuzz TARGET FILE...` built without libFuzzer (scripts/fuzz builds it with).
@Suite("Fuzz corpus", .blocking)
struct FuzzCorpusTests {
    static let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    static let targets = [
        "archive", "envelope", "batch", "membership", "keys", "fleet", "scenario", "request", "bplist", "derplist", "keybag", "keychainitem", "mbfile",
        "manifestdb", "phoneitem", "pkcs12", "certificate", "compactionnote", "joins",
    ]

    /// The seeds of `target`: its corpus directory, and for the file readers the project's own
    /// fleet and scenario files.
    static func inputs(_ target: String) throws -> [String] {
        var directories = [tests.appendingPathComponent("FuzzCorpus/\(target)")]
        let peers = tests.deletingLastPathComponent().appendingPathComponent("Peers")
        if target == "fleet" { directories.append(peers) }
        if target == "scenario" { directories.append(peers.appendingPathComponent("scenarios")) }
        return try directories.flatMap { directory in
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
                .map { directory.appendingPathComponent($0).path }
                .filter {
                    var isDirectory: ObjCBool = false
                    return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
                }
        }
    }

    @Test("every input of the corpus goes through its reader with an error or a value, never a crash", arguments: targets)
    func replay(target: String) throws {
        let binary = try CLI.locateBuilt("keyferry-fuzz")
        let inputs = try Self.inputs(target)
        #expect(!inputs.isEmpty, "the \(target) corpus has seeds")
        let process = Process()
        process.executableURL = binary
        process.arguments = [target] + inputs
        let out = Pipe()
        defer { out.closeBothEnds() }
        process.standardOutput = out
        try process.run()
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(printed)")
        #expect(printed.contains("\(target): \(inputs.count) inputs, no crash"), "\(printed)")
    }
}
