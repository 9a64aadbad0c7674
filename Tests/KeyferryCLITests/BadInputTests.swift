import Foundation
import Testing

/// Every bad input gets a clear error and the documented exit status, and changes nothing.
@Suite("keyferry CLI bad input")
struct BadInputTests {
    @Test("usage errors exit 64 before touching any device")
    func usageErrors() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let app = ["--app", "com.example.mail"]
        let cases: [([String], String)] = [
            (["item", "add", dir] + app + ["--class", "sword", "--value", "x"], "sword"),
            (["item", "add", dir] + app + ["--account", "a"], "secret"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--value-stdin"], "once"),
            (["item", "get", dir] + app + ["--limit", "several"], "limit"),
            (["item", "get", dir] + app + ["--sync", "maybe"], "sync"),
            (["item", "get", dir] + app + ["--attr", "colour=red"], "colour"),
            (["item", "get", dir] + app + ["--attr", "keySizeInBits=big"], "whole number"),
            (["item", "get", dir] + app + ["--class", "key", "--attr", "keyType=RSA"], "Apple's named values"),
            (["item", "get", dir] + app + ["--attr", "accessGroup=ABCDE12345.shared"], "--group"),
            (["item", "update", dir] + app + ["--account", "a", "--set-attr", "kSecAttrSynchronizable=yes"], "--set-sync"),
            (["item", "update", dir] + app + ["--account", "a", "--set-sync", "maybe"], "yes|no"),
            (["item", "update", dir] + app + ["--account", "a"], "--set"),
            (["device", "passcode", dir, "--set", "1", "--remove"], "exactly one"),
            (["device", "init", cli.path("other"), "--biometry"], "passcode"),
        ]
        for (arguments, mention) in cases {
            let result = try cli.run(arguments)
            #expect(result.status == 64, "\(arguments.joined(separator: " ")): \(result.stderr)")
            #expect(result.stderr.contains(mention), "\(arguments.joined(separator: " ")) should mention \(mention): \(result.stderr)")
        }
        #expect(try cli.status(dir)["itemCount"] as? Int == 0)
        #expect(!FileManager.default.fileExists(atPath: cli.path("other")))
    }

    @Test("failures outside the keychain exit 1 with a sentence naming the fix")
    func otherFailures() throws {
        let cli = try CLI()
        let notADevice = cli.path("empty")
        try FileManager.default.createDirectory(atPath: notADevice, withIntermediateDirectories: true)
        let start = try cli.run(["node", "start", notADevice])
        #expect(start.status == 1)
        #expect(start.stderr.contains("keyferry device init"))

        let dir = cli.path("phone")
        try cli.ok(["device", "init", dir])
        let notRunning = try cli.run(["item", "list", dir, "--json"])
        #expect(notRunning.status == 1)
        #expect(notRunning.stderr.contains("keyferry node start \(dir)"))
        #expect(try notRunning.object()["error"] is String)

        let again = try cli.run(["device", "init", dir])
        #expect(again.status == 1)
        #expect(again.stderr.contains("not empty"))

        // A file where the device should go is refused, and left as it was.
        let file = cli.path("notes.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        let onFile = try cli.run(["device", "init", file])
        #expect(onFile.status == 1)
        #expect(onFile.stderr.contains("is a file"))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")
        let stopNothing = try cli.run(["node", "stop", notADevice])
        #expect(stopNothing.status == 1)
        #expect(stopNothing.stderr.contains("keyferry device init"))
        for command in [["item", "list", notADevice, "--app", "com.example.mail"], ["circle", "status", notADevice], ["sync", "now", notADevice]] {
            let onNothing = try cli.run(command)
            #expect(onNothing.status == 1 && onNothing.stderr.contains("is not a Keyferry device"), "\(command): \(onNothing.stderr)")
        }

        try cli.ok(["node", "start", dir])
        let noApp = try cli.run(["item", "get", dir, "--app", "com.example.absent", "--account", "a"])
        #expect(noApp.status == 1)
        #expect(noApp.stderr.contains("com.example.absent"))
        let badFile = try cli.run(["item", "add", dir, "--app", "com.example.absent", "--value-file", cli.path("missing")])
        #expect(badFile.status == 64)
    }

    @Test("a malformed request to the control API is refused without changing the device")
    func malformedRequest() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        curl.arguments = ["curl", "-s", "-o", "/dev/stdout", "-w", "%{http_code}", "--unix-socket", dir + "/node.sock",
                          "-X", "POST", "-d", "{\"app\": 5}", "http://localhost/v1/add"]
        let out = Pipe()
        curl.standardOutput = out
        guard (try? curl.run()) != nil else { return }
        let answer = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        curl.waitUntilExit()
        guard curl.terminationStatus == 0 else { return }  // no curl on this machine
        #expect(answer.hasSuffix("400"))
        #expect(answer.contains("\"domain\":\"request\""))
        #expect(try cli.status(dir)["itemCount"] as? Int == 0)
    }
}
