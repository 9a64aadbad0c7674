import Foundation
import KeychainTesting
import KeyferryThreads
import Testing

@Suite("Locked")
struct LockedTests {
    static let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let reproduction = here.appendingPathComponent("Reproduction/LockAfterHop.swift")
    static let lockedSource = here.appendingPathComponent("../../Sources/KeyferryThreads/Locked.swift").standardizedFileURL

    /// Compiles the reproduction optimized, as a release build does, runs it, and returns its
    /// exit status and everything it printed.
    static func compileAndRun(_ extra: [String], in directory: URL) throws -> (status: Int32, output: String) {
        let binary = directory.appendingPathComponent("lock-after-hop")
        let compile = try run(
            "/usr/bin/env",
            ["swiftc", "-O", "-parse-as-library", "-package-name", "keyferry", reproduction.path] + extra + ["-o", binary.path])
        try #require(compile.status == 0, "swiftc failed: \(compile.output)")
        return try run(binary.path, [])
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        // The crash reporter's backtrace is long and slow; the fatal error's line is enough.
        process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try? output.fileHandleForReading.close()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("a lock taken after an actor's throwing call returns, compiled -O: Mutex stops the process, Locked holds", .blocking)
    func lockAfterHop() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-locked-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let mutex = try Self.compileAndRun([], in: directory)
        #expect(
            mutex.status != 0 && mutex.output.contains("Call to unlock Mutex on a thread which hasn't acquired the lock"),
            """
            Synchronization.Mutex no longer fails after a hop with this toolchain (exit \(mutex.status): \(mutex.output)). \
            If that holds for every toolchain Keyferry supports, Locked can go back to being Mutex.
            """)

        let locked = try Self.compileAndRun(["-DLOCKED", Self.lockedSource.path], in: directory)
        #expect(locked.status == 0)
        #expect(locked.output == "ok 2000\n")
    }

    @Test("one thread's lock keeps out every other thread")
    func excludes() {
        let counter = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<10_000 { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }

    @Test("an error thrown under the lock leaves it free and the value as the body left it")
    func throwing() {
        struct Refused: Error {}
        let value = Locked([1])
        #expect(throws: Refused.self) {
            try value.withLock { array in
                array.append(2)
                throw Refused()
            }
        }
        #expect(value.withLock { $0 } == [1, 2])
    }
}
