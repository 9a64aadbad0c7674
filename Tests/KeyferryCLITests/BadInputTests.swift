import Foundation
import KeychainTesting
import KeyferrySystem
import KeyferryThreads
import Testing

/// Every bad input gets a clear error and the documented exit status, and changes nothing.
@Suite("keyferry CLI bad input", .blocking)
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
            // `app list` never took --bundle: it is not rewritten to an --app it refuses too.
            (["app", "list", dir, "--bundle", "com.example.mail"], "Unknown option '--bundle'"),
        ]
        for (arguments, mention) in cases {
            let result = try cli.run(arguments)
            #expect(result.status == 64, "\(arguments.joined(separator: " ")): \(result.stderr)")
            #expect(result.stderr.contains(mention), "\(arguments.joined(separator: " ")) should mention \(mention): \(result.stderr)")
            #expect(!result.stderr.contains("is now --app"), "\(arguments.joined(separator: " "))")
        }
        #expect(try cli.status(dir)["itemCount"] as? Int == 0)
        #expect(!FileManager.default.fileExists(atPath: cli.path("other")))
    }

    @Test("the exit statuses as JSON, for scripts: `help exit-codes --json` and `exit-codes --json` give the table the text gives")
    func exitCodesAsJSON() throws {
        let cli = try CLI()
        let text = try cli.ok(["help", "exit-codes"]).text
        for arguments in [["help", "exit-codes", "--json"], ["exit-codes", "--json"]] {
            let rows = try #require(try cli.ok(arguments).json() as? [[String: Any]], "\(arguments)")
            #expect(rows.compactMap { $0["status"] as? Int } == [0, 1, 3, 4, 5, 6, 64, 130], "\(arguments)")
            for row in rows {
                let line = "\(row["status"] as? Int ?? -1)".padding(toLength: 5, withPad: " ", startingAt: 0) + "\(row["meaning"] as? String ?? "")"
                #expect(text.contains(line), "\(line)")
            }
        }
    }

    @Test("failures outside the keychain exit with their kind's status and a sentence naming the fix")
    func otherFailures() throws {
        let cli = try CLI()
        let notADevice = cli.path("empty")
        try FileManager.default.createDirectory(atPath: notADevice, withIntermediateDirectories: true)
        let start = try cli.run(["node", "start", notADevice])
        #expect(start.status == 5)
        #expect(start.stderr.contains("keyferry device init"))

        let dir = cli.path("phone")
        try cli.ok(["device", "init", dir])
        let notRunning = try cli.run(["item", "list", dir, "--json"])
        #expect(notRunning.status == 6)
        #expect(notRunning.stderr.contains("keyferry node start \(dir)"))
        #expect(try notRunning.object()["error"] is String)

        let again = try cli.run(["device", "init", dir])
        #expect(again.status == 64)
        #expect(again.stderr.contains("is already a device (phone); `keyferry node start \(dir)` powers it on"), "\(again.stderr)")

        // A file where the device should go is refused, and left as it was.
        let file = cli.path("notes.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        let onFile = try cli.run(["device", "init", file])
        #expect(onFile.status == 64)
        #expect(onFile.stderr.contains("is a file"))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")
        let stopNothing = try cli.run(["node", "stop", notADevice])
        #expect(stopNothing.status == 5)
        #expect(stopNothing.stderr.contains("keyferry device init"))
        for command in [["item", "list", notADevice, "--app", "com.example.mail"], ["circle", "status", notADevice], ["sync", "now", notADevice]] {
            let onNothing = try cli.run(command)
            #expect(onNothing.status == 5 && onNothing.stderr.contains("is not a Keyferry device"), "\(command): \(onNothing.stderr)")
        }

        try cli.ok(["node", "start", dir])
        let noApp = try cli.run(["item", "get", dir, "--app", "com.example.absent", "--account", "a"])
        #expect(noApp.status == 5)
        #expect(noApp.stderr.contains("com.example.absent"))
        let badFile = try cli.run(["item", "add", dir, "--app", "com.example.absent", "--value-file", cli.path("missing")])
        #expect(badFile.status == 5 && badFile.stderr.contains("there is no such file"), "a missing file is not found, wherever it is named")
    }

    @Test("the first hour's mistakes: each one's exit status and sentence, JSON under --json, and nothing changed")
    func contractTable() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let open = try cli.poweredDevice("open", passcode: nil)
        let app = ["--app", "com.example.mail"]
        try cli.ok(["item", "add", dir] + app + ["--account", "kept", "--value", "v"])
        let big = cli.root.appendingPathComponent("big.bin")
        try Data(repeating: 7, count: 3 << 20).write(to: big)
        let before = try snapshot(cli, [dir, open])

        let cases: [(arguments: [String], status: Int32, mention: String)] = [
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--access-control", "foo"], 64, "'foo' is not an access control flag"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--access-control", "or"], 64, "asks nothing of the user"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--access-control", "biometryAny|and"], 64, "fewer than two constraints"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--class", "internetPassword", "--port", "99999"], 64, "0 to 65535"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--class", "internetPassword", "--protocol", "bogus"], 64, "kSecAttrProtocol"),
            (["item", "add", dir, "--app", "", "--account", "a", "--value", "x"], 64, "bundle ID cannot be empty"),
            (["item", "add", dir] + app + ["--account", "a", "--value-file", cli.root.appendingPathComponent("absent").path], 5, "there is no such file"),
            (["item", "add", dir] + app + ["--account", "a", "--value-file", cli.root.path], 64, "it is a directory"),
            (["item", "add", dir] + app + ["--account", "a", "--value-file", big.path], 3, "errSecDataTooLarge (-25302): the secret is 3 MiB"),
            (["item", "get", dir] + app + ["--limit", "0"], 64, "from 1"),
            (["item", "delete", dir] + app, 64, "--all"),
            (["item", "update", dir] + app + ["--set-label", "x"], 64, "--all"),
            (["app", "install", dir, "--app", "com.example.x", "--team", "short"], 64, "not a valid team ID"),
            (["app", "install", dir, "--app", "", "--team", "ABCDE12345"], 64, "bundle ID cannot be empty"),
            (["device", "init", cli.path("new"), "--passcode", ""], 64, "passcode cannot be empty"),
            (["device", "init", cli.path("new"), "--passcode", "12"], 64, "at least 4 characters"),
            (["device", "init", cli.path("new"), "--name", ""], 64, "name cannot be empty"),
            (["device", "passcode", dir, "--set", "2222"], 4, "give it with --current"),
            (["device", "unlock", open, "--passcode", "1234"], 64, "has no passcode"),
            (["circle", "create", dir, "--relay", "ftp://127.0.0.1:7700"], 64, "https://HOST:PORT"),
            (["circle", "create", dir, "--relay", "127.0.0.1"], 64, "HOST:PORT"),
            (["relay", "serve", "--data", cli.path("relay"), "--listen", "localhost"], 64, "not a relay address"),
            (["backup", "create", dir, "--out", cli.path("a.kfbackup"), "--encrypted"], 64, "needs a password"),
            // A file an option names, missing, is not found, as any other file (W10).
            (["backup", "create", dir, "--out", cli.path("a.kfbackup"), "--encrypted", "--password-file", cli.path("absent")], 5, "there is no such file"),
            (["item", "add", dir] + app + ["--class", "identity", "--p12", cli.path("absent.p12")], 5, "there is no such file"),
            (["item", "add", dir] + app + ["--class", "certificate", "--from", big.path], 64, "is not a DER X.509 certificate"),
            (["itme", "list", dir], 64, "did you mean 'item'"),
            (["item", "rm", dir] + app, 64, "did you mean 'delete'"),
        ]
        for (arguments, status, mention) in cases {
            let shown = arguments.joined(separator: " ")
            let result = try cli.run(arguments)
            #expect(result.status == status, "\(shown): \(result.stderr)")
            #expect(result.stderr.contains(mention), "\(shown) should say \(mention): \(result.stderr)")
            #expect(!result.stderr.contains("Error(") && !result.stderr.contains("NIO"), "\(shown) shows internal text: \(result.stderr)")
            // The same mistake under --json: the failure is JSON on stdout too.
            let json = try cli.run(arguments + ["--json"])
            #expect(json.status == status, "\(shown) --json: \(json.stderr)")
            let object = try? JSONSerialization.jsonObject(with: json.stdout) as? [String: Any]
            #expect(object?["error"] is String || object?["status"] is Int, "\(shown) --json printed \(json.text)")
        }
        #expect(try snapshot(cli, [dir, open]) == before, "a refused command changed a device or left a file")
    }

    /// Each device's items and settings, and the files under the test's root.
    private func snapshot(_ cli: CLI, _ devices: [String]) throws -> [String] {
        var lines: [String] = []
        for dir in devices {
            let status = try cli.status(dir)
            lines.append(
                "\(dir) \(status["itemCount"] ?? "") \(status["passcodeSet"] ?? "") \(status["failedPasscodeAttempts"] ?? "") \(status["lockState"] ?? "")")
            lines.append(try cli.ok(["item", "list", dir, "--json"]).text)
        }
        let files =
            FileManager.default.enumerator(atPath: cli.root.path)?.compactMap { $0 as? String }
            .filter { !$0.hasSuffix(".log") && !$0.contains("keychain.db") && !$0.hasPrefix("state") } ?? []
        return lines + files.sorted()
    }

    @Test("secrets from any stream; counts of what update and delete touched; off is a node status")
    func streamsAndCounts() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let app = ["--app", "com.example.mail"]
        try cli.ok(["item", "add", dir] + app + ["--account", "piped", "--value-file", "/dev/stdin"], stdin: Data("from a pipe".utf8))
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "piped"]).text == "from a pipe")
        for account in ["b", "c"] { try cli.ok(["item", "add", dir] + app + ["--account", account, "--service", "s", "--value", "v"]) }
        #expect(try cli.ok(["item", "update", dir] + app + ["--service", "s", "--set-label", "l", "--json"]).object()["updated"] as? Int == 2)
        #expect(try cli.ok(["item", "delete", dir] + app + ["--all"]).text == "deleted 3 items\n")
        // The quiet form prints nothing but results.
        #expect(try cli.ok(["item", "add", dir] + app + ["--account", "q", "--value", "v", "--quiet"]).text.isEmpty)
        try cli.ok(["node", "stop", dir])
        let off = try cli.run(["node", "status", dir])
        #expect(off.status == 0 && off.text.hasPrefix("not running: "), "\(off.stderr)")
        // Enrolling biometry is done unlocked, as in Settings.
        try cli.ok(["node", "start", dir])
        let early = try cli.run(["device", "biometry", dir, "--enroll"])
        #expect(early.status == 6 && early.stderr.contains("unlock it first"), "\(early.stderr)")
    }

    @Test("of several device inits racing for one directory, exactly one succeeds; the others say it exists")
    func racingInit() throws {
        let cli = try CLI()
        let dir = cli.path("raced")
        let results = Locked<[Int32]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            let status = (try? cli.run(["device", "init", dir, "--passcode", "100\(index)"]))?.status ?? -1
            results.withLock { $0.append(status) }
        }
        #expect(results.withLock { $0.sorted() } == [0, 64, 64, 64])
        try cli.ok(["node", "start", dir])
        let unlocked = try (0..<4).map { try cli.run(["device", "unlock", dir, "--passcode", "100\($0)"]).status }
        #expect(unlocked.filter { $0 == 0 }.count == 1, "one passcode works: the winner's")
    }

    @Test("sync now with the relay down says what it waits for and gives up after --timeout; a relay that comes back in time is used")
    func syncTimeout() throws {
        let cli = try CLI()
        let phone = try cli.poweredDevice("phone")
        let (relay, line) = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0"])
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        try cli.ok(["circle", "create", phone, "--relay", url])
        relay.terminate()
        relay.waitUntilExit()
        let result = try cli.run(["sync", "now", phone, "--timeout", "3"])
        #expect(result.status == 6, "unavailable now, as `keyferry help exit-codes` says")
        #expect(
            result.stderr.contains("waiting for the relay (up to 3 s") && result.stderr.contains("the relay at \(url) did not answer within 3 s")
                && result.stderr.contains("nothing is listening there"), "\(result.stderr)")

        // Ctrl-C while it waits: exit 130, as every command that stops on it.
        let (waiting, _) = try cli.start(["sync", "now", phone, "--timeout", "60"], whenItSays: "waiting for the relay")
        ProcessControl.send(.interrupt, to: waiting.processIdentifier)
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 130 && waiting.terminationReason == .exit, "stopped by its handler, not killed by the signal")

        // As in CI, where the relay may still be starting: it comes up while sync now waits.
        let (late, output) = try cli.start(["sync", "now", phone, "--timeout", "60"], whenItSays: "waiting for the relay")
        let listen = String(url.dropFirst("http://".count))
        _ = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", listen])
        let printed = String(decoding: output.readDataToEndOfFile(), as: UTF8.self)
        late.waitUntilExit()
        #expect(late.terminationStatus == 0 && printed.contains("pushed"), "\(printed)")
    }

    @Test("a malformed request to the control API is refused without changing the device")
    func malformedRequest() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        curl.arguments = [
            "curl", "-s", "-o", "/dev/stdout", "-w", "%{http_code}", "--unix-socket", dir + "/node.sock",
            "-X", "POST", "-d", "{\"app\": 5}", "http://localhost/v1/add",
        ]
        let out = Pipe()
        defer { out.closeBothEnds() }
        curl.standardOutput = out
        guard (try? curl.run()) != nil else { return }
        let answer = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        curl.waitUntilExit()
        guard curl.terminationStatus == 0 else { return }  // no curl on this machine
        #expect(answer.hasSuffix("400"))
        #expect(answer.contains("\"code\":\"invalidRequest\""))
        #expect(try cli.status(dir)["itemCount"] as? Int == 0)
    }
}
