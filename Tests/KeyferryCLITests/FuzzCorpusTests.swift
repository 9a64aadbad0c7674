import Foundation
import Testing

/// The fuzzers' seed corpus and the crashes they found, replayed through every reader on each
/// run: `keyferry-fuzz TARGET FILE...` built without libFuzzer (scripts/fuzz builds it with).
@Suite("Fuzz corpus")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("FuzzCorpus")
    static let targets = ["archive", "envelope", "batch", "membership", "keys", "fleet", "scenario", "request"]

    @Test("every input of the corpus goes through its reader with an error or a value, never a crash", arguments: targets)
    func replay(target: String) throws {
        let binary = try CLI.locateBinary().deletingLastPathComponent().appendingPathComponent("keyferry-fuzz")
        let inputs = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.appendingPathComponent(target).path).sorted()
            .map { Self.corpus.appendingPathComponent(target).appendingPathComponent($0).path }
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
