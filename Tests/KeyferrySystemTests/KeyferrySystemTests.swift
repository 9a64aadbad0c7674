import Foundation
import KeychainTesting
import KeyferrySystem
import Testing

@Suite("the system's C library, behind KeyferrySystem")
struct KeyferrySystemTests {
    let root: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("kf-system-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    /// Removes the test's directory, whatever the test left in it.
    func cleanUp() { try? FileManager.default.removeItem(at: root) }

    @Test("two writers appending to one log (a node's logger and its redirected standard error) never overwrite each other")
    func appending() throws {
        defer { cleanUp() }
        let log = root.appendingPathComponent("node.log")
        let logger = try FileHandle.appending(to: log)
        let standardError = try FileHandle.appending(to: log)
        try logger.write(contentsOf: Data("one\n".utf8))
        try standardError.write(contentsOf: Data("two\n".utf8))
        try logger.write(contentsOf: Data("three\n".utf8))
        try logger.close()
        try standardError.close()
        #expect(try String(contentsOf: log, encoding: .utf8) == "one\ntwo\nthree\n")
        let permissions = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(permissions == 0o600, "a log is its owner's alone")
        #expect(throws: SystemError.self) { try FileHandle.appending(to: root.appendingPathComponent("missing/node.log")) }
    }

    @Test("a finished file never replaces what is at its path: the move is refused and both files stay as they were")
    func moveFile() throws {
        defer { cleanUp() }
        let finished = root.appendingPathComponent("archive.partial")
        let destination = root.appendingPathComponent("archive.kfbackup")
        try Data("new".utf8).write(to: finished)
        try Data("someone else's".utf8).write(to: destination)
        let refusal = try #require(throws: SystemError.self) { try Placement.moveFile(finished, to: destination) }
        #expect(refusal.isOccupied)
        #expect(try Data(contentsOf: destination) == Data("someone else's".utf8))
        #expect(try Data(contentsOf: finished) == Data("new".utf8))

        try FileManager.default.removeItem(at: destination)
        try Placement.moveFile(finished, to: destination)
        #expect(try Data(contentsOf: destination) == Data("new".utf8))
        #expect(!FileManager.default.fileExists(atPath: finished.path))
    }

    @Test("a new directory takes the place of a missing or empty one, never of one with something in it")
    func moveDirectory() throws {
        defer { cleanUp() }
        let staging = root.appendingPathComponent("staging")
        let target = root.appendingPathComponent("phone")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        try Data("device".utf8).write(to: staging.appendingPathComponent("device.json"))
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        try Data("theirs".utf8).write(to: target.appendingPathComponent("device.json"))

        let refusal = try #require(throws: SystemError.self) { try Placement.moveDirectory(staging, to: target) }
        #expect(refusal.isOccupied)
        #expect(try Data(contentsOf: target.appendingPathComponent("device.json")) == Data("theirs".utf8))

        try FileManager.default.removeItem(at: target.appendingPathComponent("device.json"))
        try Placement.moveDirectory(staging, to: target)
        #expect(try Data(contentsOf: target.appendingPathComponent("device.json")) == Data("device".utf8))
    }

    @Test("a process lock is held once, seen as held, and free again when released")
    func processLock() throws {
        defer { cleanUp() }
        let file = root.appendingPathComponent("node.lock")
        #expect(!ProcessLock.isHeld(file))
        let lock = try #require(try ProcessLock.acquire(file))
        #expect(ProcessLock.isHeld(file))
        #expect(try ProcessLock.acquire(file) == nil, "a second holder is refused")
        lock.release()
        #expect(!ProcessLock.isHeld(file))
        try #require(try ProcessLock.acquire(file)).release()

        let unusable = try #require(throws: SystemError.self) { try ProcessLock.acquire(root.appendingPathComponent("missing/node.lock")) }
        #expect(unusable.description == "cannot open \(root.path)/missing/node.lock: no such file or directory")
    }

    @Test("a signal reaches the process it names, and a dead process is seen as dead", .blocking)
    func signals() throws {
        defer { cleanUp() }
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        defer { if sleeper.isRunning { sleeper.terminate() } }
        let pid = sleeper.processIdentifier
        #expect(ProcessControl.isAlive(pid))
        #expect(ProcessControl.send(.kill, to: pid))
        sleeper.waitUntilExit()
        #expect(sleeper.terminationReason == .uncaughtSignal)
        #expect(sleeper.terminationStatus == 9)
        #expect(!ProcessControl.isAlive(pid))
        #expect(!ProcessControl.send(.terminate, to: pid), "no such process to signal")
        #expect(!ProcessControl.send(.terminate, to: 0), "never the whole process group")
    }
}
