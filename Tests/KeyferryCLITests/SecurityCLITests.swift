import Foundation
import KeychainModel
import KeychainTesting
import KeyferrySecurity
import Testing

/// Keychain Services calls against devices the command line made: through a running node, and
/// in this process when no node runs.
@Suite("KeyferrySecurity on device directories", .blocking)
struct SecurityCLITests {
    static func add(_ account: String, _ value: String) -> OSStatus {
        SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecValueData: Data(value.utf8),
                kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
            ] as CFDictionary, nil)
    }

    static func read(_ account: String) -> (OSStatus, Data?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecReturnData: true] as CFDictionary, &result)
        return (status, result as? Data)
    }

    @Test("through a running node: calls reach its device, the command line sees the items, a lock shows at once")
    func throughNode() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail")
        defer { context.close() }
        context.run {
            #expect(Self.add("token", "s3cret") == errSecSuccess)
            #expect(Self.add("token", "again") == errSecDuplicateItem)
            #expect(Self.read("token").1 == Data("s3cret".utf8))
        }
        #expect(try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", "token"]).text == "s3cret")
        try cli.ok(["node", "reboot", dir])
        context.run { #expect(Self.read("token").0 == errSecInteractionNotAllowed) }
        #expect(context.lastFailure?.isEmpty == false)
        try cli.ok(["node", "stop", dir])
        context.run { #expect(Self.read("token").0 == errSecNotAvailable, "a node that stopped: no keychain") }
    }

    @Test("through a running node: the app's UserDefaults and Documents, with their protection, as the command line sees them")
    func sandboxThroughNode() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail")
        defer { context.close() }
        context.userDefaults.set("alice@example.com", forKey: "signedInUser")
        context.userDefaults.set(true, forKey: "onboarded")
        #expect(context.userDefaults.bool(forKey: "onboarded"))
        let shown = try cli.ok(["app", "defaults", dir, "--app", "com.example.mail", "--list", "--json"]).text
        #expect(shown.contains("alice@example.com"), "\(shown)")

        let files = context.fileManager
        let documents = try #require(files.urls(for: .documentDirectory, in: .userDomainMask).first)
        let index = documents.appendingPathComponent("index.db").path
        #expect(files.createFile(atPath: index, contents: Data("mail".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
        let listed = try cli.ok(["app", "file", dir, "--app", "com.example.mail", "--list"]).text
        #expect(listed.contains("index.db") && listed.contains("complete"), "\(listed)")
        try cli.ok(["device", "lock", dir, "--now"])
        #expect(files.contents(atPath: index) == nil)
        #expect(context.run { !context.isProtectedDataAvailable })
        try cli.ok(["node", "reboot", dir])
        #expect(context.userDefaults.string(forKey: "signedInUser") == nil, "before first unlock")
    }

    @Test("a directory no node runs is powered on in this process, unlocked, and held: no node starts meanwhile")
    func inProcess() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "a", "--value", "v", "--accessible", "afterFirstUnlock"])
        try cli.ok(["node", "stop", dir])

        #expect(throws: (any Error).self) { try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail", passcode: "000000") }
        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail", passcode: "123456")
        context.run {
            #expect(Self.read("a").1 == Data("v".utf8))
            #expect(Self.add("b", "w") == errSecSuccess)
        }
        let start = try cli.run(["node", "start", dir])
        #expect(start.status != 0, "the device is held by this process: \(start.stderr)")
        context.close()
        try cli.ok(["node", "start", dir])
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        #expect(try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", "b"]).text == "w")
    }
}

@Suite("keyferry audit", .blocking)
struct AuditCLITests {
    @Test("lists the traps code fell into through a node, with file, line, count and why; --strict fails; --clear empties")
    func listsTraps() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        #expect(try cli.ok(["audit", dir]).text.contains("no keychain traps recorded on \(dir)."))

        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail")
        defer { context.close() }
        let line = #line + 3
        context.run {
            for account in ["a", "b"] {
                SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: account] as CFDictionary, nil)
            }
        }
        let text = try cli.ok(["audit", dir]).text
        #expect(text.contains("2 calls fell into keychain traps at 1 place on \(dir):"))
        #expect(text.contains("KeyferryCLITests/SecurityCLITests.swift:\(line): no accessibility on add (SecItemAdd, 2x, com.example.mail)"))
        #expect(text.contains(KeychainTrap.noAccessibilityOnAdd.why))

        let json = try cli.ok(["audit", dir, "--json"]).object()
        let findings = try #require(json["findings"] as? [[String: Any]])
        #expect(findings.first?["trap"] as? String == "noAccessibilityOnAdd")
        #expect(findings.first?["line"] as? Int == line)
        #expect(findings.first?["count"] as? Int == 2)

        let strict = try cli.run(["audit", dir, "--strict", "--clear"])
        #expect(strict.status == 1)
        #expect(strict.text.contains("the log is now empty."))
        try cli.ok(["audit", dir, "--strict"])

        // The command line's own adds get the audit's warning at once, on stderr.
        let app = ["--app", "com.example.mail"]
        let bound = try cli.ok(["item", "add", dir] + app + ["--account", "s", "--value", "v", "--sync", "--accessible", "whenUnlockedThisDeviceOnly"])
        #expect(bound.stderr.contains("warning: synchronizable and ThisDeviceOnly: " + KeychainTrap.synchronizableThisDeviceOnly.why), "\(bound.stderr)")
        let always = try cli.ok(["item", "add", dir] + app + ["--account", "t", "--value", "v", "--accessible", "always"])
        #expect(always.stderr.contains("warning: deprecated Always accessibility"), "\(always.stderr)")
        #expect(try cli.ok(["item", "add", dir] + app + ["--account", "u", "--value", "v", "--accessible", "afterFirstUnlock"]).stderr.isEmpty)
    }

    @Test("a directory that is not a device is refused")
    func notADevice() throws {
        let cli = try CLI()
        let result = try cli.run(["audit", cli.root.appendingPathComponent("nothing").path])
        #expect(result.status == 5)
        #expect(result.stderr.contains("nothing"))
    }
}

@Suite("Passcodes out of argv", .blocking)
struct PasscodeInputCLITests {
    @Test("a passcode on the command line works, with one warning on stderr that says why and what to use instead")
    func argvWarning() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["device", "lock", dir, "--now"])
        let unlocked = try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        #expect(unlocked.stderr.components(separatedBy: "warning: --passcode puts the passcode on the command line").count == 2, "\(unlocked.stderr)")
        #expect(unlocked.stderr.contains("--passcode-file F or --passcode-stdin"))
        let fromFile = cli.root.appendingPathComponent("passcode.txt")
        try "123456\n".write(to: fromFile, atomically: true, encoding: .utf8)
        try cli.ok(["device", "lock", dir, "--now"])
        #expect(!(try cli.ok(["device", "unlock", dir, "--passcode-file", fromFile.path]).stderr.contains("warning")))
    }

    @Test("device unlock takes the passcode from a file's or standard input's first line; without one, it says how to give it")
    func unlockFromFileAndStdin() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let file = cli.root.appendingPathComponent("passcode")
        try Data("123456\nsecond line ignored\n".utf8).write(to: file)

        try cli.ok(["node", "reboot", dir])
        try cli.ok(["device", "unlock", dir, "--passcode-file", file.path])
        #expect(try cli.ok(["device", "status", dir, "--json"]).object()["lockState"] as? String == "unlocked")

        try cli.ok(["node", "reboot", dir])
        try cli.ok(["device", "unlock", dir, "--passcode-stdin"], stdin: Data("123456\n".utf8))
        #expect(try cli.ok(["device", "status", dir, "--json"]).object()["lockState"] as? String == "unlocked")

        try cli.ok(["node", "reboot", dir])
        let empty = cli.root.appendingPathComponent("empty")
        try Data().write(to: empty)
        // A missing passcode is the authentication status, as a wrong one is; the rest are usage.
        for (arguments, status, message) in [
            ([String](), 4, "give it with --passcode-file F, --passcode-stdin, or --passcode"),
            (["--passcode", "123456", "--passcode-stdin"], 64, "give the passcode once"),
            (["--passcode-file", cli.root.appendingPathComponent("missing").path], 5, "there is no such file"),
            (["--passcode-file", empty.path], 64, "is empty"),
        ] as [([String], Int32, String)] {
            let result = try cli.run(["device", "unlock", dir] + arguments, stdin: Data())
            #expect(result.status == status && result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(try cli.ok(["device", "status", dir, "--json"]).object()["lockState"] as? String == "bfu", "nothing unlocked it")
    }

    @Test("device init, device passcode and --auth take passcodes from files too, checked as in argv; without a terminal the current one is asked for by name")
    func passcodesFromFiles() throws {
        let cli = try CLI()
        func file(_ name: String, _ text: String) throws -> String {
            let url = cli.root.appendingPathComponent(name)
            try Data(text.utf8).write(to: url)
            return url.path
        }
        let first = try file("first", "123456\n")
        let second = try file("second", "654321\n")
        let empty = try file("empty", "\nnot the first line\n")
        let dir = cli.path("phone")
        let refused = try cli.run(["device", "init", dir, "--passcode-file", empty])
        #expect(refused.status == 64 && refused.stderr.contains("is empty; its first line is the passcode"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir), "a refused passcode makes no device")
        try cli.ok(["device", "init", dir, "--passcode-file", first])
        try cli.ok(["node", "start", dir])
        try cli.ok(["device", "unlock", dir, "--passcode-file", first])
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345"])

        let noCurrent = try cli.run(["device", "passcode", dir, "--set-file", second], stdin: Data())
        #expect(noCurrent.status == 4 && noCurrent.stderr.contains("--current-file F"), "\(noCurrent.stderr)")
        let wrong = try cli.run(["device", "passcode", dir, "--set-file", second, "--current-file", second])
        #expect(wrong.status != 0)
        #expect(try cli.status(dir)["failedPasscodeAttempts"] as? Int == 1, "a wrong current passcode counts")
        try cli.ok(["device", "passcode", dir, "--set-file", second, "--current-file", first])
        try cli.ok(["node", "reboot", dir])
        try cli.ok(["device", "unlock", dir, "--passcode-file", second])

        try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "guarded", "--value", "g", "--access-control", "devicePasscode"])
        let read = try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", "guarded", "--auth", "passcode-file:\(second)"])
        #expect(read.text.trimmingCharacters(in: .whitespacesAndNewlines) == "g", "\(read.text)")
        let missing = try cli.run(["item", "get", dir, "--app", "com.example.mail", "--account", "guarded", "--auth", "passcode-file:\(cli.path("none"))"])
        #expect(missing.status != 0 && missing.stderr.contains("no such file"), "\(missing.stderr)")
    }
}
