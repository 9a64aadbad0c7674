import Foundation
import KeychainTesting
import KeyferrySystem
import Testing

/// The seed scenarios and the node lifecycle, through the command line only.
@Suite("keyferry CLI against running nodes", .blocking)
struct NodeCLITests {
    let app = ["--app", "com.example.mail"]

    @Test("a node starts, a second start has nothing to do, it counts wrong passcodes and powers off")
    func lifecycle() throws {
        let cli = try CLI()
        let dir = cli.path("phone")
        try cli.ok(["device", "init", dir, "--passcode", "123456", "--biometry"])
        #expect(try cli.status(dir)["poweredOn"] as? Bool == false)
        try cli.ok(["node", "start", dir])
        let second = try cli.run(["node", "start", dir])
        #expect(second.status == 0)
        #expect(second.text.hasPrefix("already running (pid "), "\(second.text)")
        #expect(try cli.status(dir)["lockState"] as? String == "bfu")

        let wrong = try cli.run(["device", "unlock", dir, "--passcode", "000000", "--json"])
        #expect(wrong.status == 4)
        #expect(wrong.stderr.hasPrefix("warning: --passcode puts the passcode on the command line"))
        #expect(wrong.stderr.contains("\nerrSecAuthFailed (-25293): "), "\(wrong.stderr)")
        #expect(try wrong.object()["status"] as? Int == -25293)
        #expect(try cli.status(dir)["failedPasscodeAttempts"] as? Int == 1)
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        #expect(try cli.status(dir)["lockState"] as? String == "unlocked")

        try cli.ok(["node", "stop", dir])
        #expect(try cli.status(dir)["poweredOn"] as? Bool == false)
        let stopped = try cli.run(["device", "lock", dir])
        #expect(stopped.status == 6)
        #expect(stopped.stderr.contains("keyferry node start"))
    }

    @Test("device init --profile: simulator shows in status; an unknown profile or a Simulator's passcode is refused, and nothing is made")
    func profiles() throws {
        let cli = try CLI()
        let sim = cli.path("sim")
        try cli.ok(["device", "init", sim, "--profile", "simulator", "--biometry"])
        let status = try cli.status(sim)
        #expect(status["profile"] as? String == "simulator" && status["biometryEnrolled"] as? Bool == true)
        let unknown = try cli.run(["device", "init", cli.path("watch"), "--profile", "watch"])
        #expect(unknown.status != 0 && unknown.stderr.contains("profiles: iphone, simulator"), "\(unknown.stderr)")
        let passcode = try cli.run(["device", "init", cli.path("sim2"), "--profile", "simulator", "--passcode", "123456"])
        #expect(passcode.status != 0 && passcode.stderr.contains("no passcode to set"), "\(passcode.stderr)")
        for made in ["watch", "sim2"] { #expect(!FileManager.default.fileExists(atPath: cli.path(made))) }
        #expect(try cli.run(["device", "init", "--help"]).text.contains("simulator: the iOS"))
    }

    @Test("Stolen Device Protection: away, removing the passcode waits an hour of the device's clock (exit 6); before iOS 17.3 there is none")
    func stolenDeviceProtection() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone", extra: ["--biometry"])
        let shown = try cli.ok(["device", "security", dir, "--away", "--json"]).object()
        #expect(shown["stolenDeviceProtection"] as? String == "away" && shown["away"] as? Bool == true)
        let held = try cli.run(["device", "passcode", dir, "--remove", "--current", "123456"])
        #expect(held.status == 6 && held.stderr.contains("Security Delay"), "\(held.stderr)")
        #expect(try cli.ok(["device", "security", dir]).text.contains("Security Delay under way for changing or removing the passcode"))
        try cli.ok(["device", "clock", dir, "--advance", "1h"])
        try cli.ok(["device", "passcode", dir, "--remove", "--current", "123456"])
        #expect(try cli.status(dir)["passcodeSet"] as? Bool == false)
        let old = try cli.poweredDevice("old", extra: ["--profile", "iphone-ios16"])
        let none = try cli.run(["device", "security", old, "--away"])
        #expect(none.status != 0 && none.stderr.contains("no Stolen Device Protection"), "\(none.stderr)")
    }

    @Test("a Mac: item add lands in the file-based keychain unless --keychain says otherwise; a plain delete empties both")
    func macKeychains() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("mac", extra: ["--profile", "mac", "--biometry"])
        #expect(try cli.ok(["device", "status", dir]).text.contains("mac: Mac, on, unlocked, passcode set, Touch ID enrolled"))
        let unnamed = cli.path("unnamed")
        try cli.ok(["device", "init", unnamed, "--profile", "mac"])
        #expect(try cli.status(unnamed)["name"] as? String == "unnamed", "a device unnamed is called after its directory, as a fleet's are after their ids")
        let added = try cli.ok(["item", "add", dir] + app + ["--account", "token", "--value", "t0k", "--accessible", "whenUnlocked", "--json"])
        let record = try #require(try added.json() as? [[String: Any]]).first
        #expect(record?["keychain"] as? String == "file-based" && record?["accessible"] == nil)
        #expect(record?["accessGroup"] as? String == "file-based keychain of com.example.mail")
        let missing = try cli.run(["item", "get", dir] + app + ["--account", "token", "--keychain", "data-protection"])
        #expect(missing.status != 0 && missing.stderr.contains("errSecItemNotFound"), "\(missing.stderr)")
        try cli.ok(["item", "add", dir] + app + ["--account", "token", "--value", "dp", "--keychain", "data-protection"])
        try cli.ok(["device", "lock", dir, "--now"])
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "token", "--keychain", "file-based"]).text == "t0k")
        #expect(try cli.run(["item", "get", dir] + app + ["--account", "token", "--keychain", "data-protection"]).status != 0)
        #expect(try cli.ok(["item", "delete", dir] + app + ["--account", "token"]).text.contains("deleted 2 items"))
        let wrong = try cli.run(["item", "get", dir] + app + ["--account", "token", "--keychain", "login"])
        #expect(wrong.status != 0 && wrong.stderr.contains("file-based"), "\(wrong.stderr)")
    }

    @Test("app defaults stores typed values as app code would, shows them as it takes them, and removes a key")
    func typedDefaults() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let defaults = ["app", "defaults", dir] + app
        for (assignment, type) in [
            ("launches=3", "int"), ("ratio=0.5", "real"), ("onboarded=yes", "bool"), ("when=2026-01-02T03:04:05Z", "date"), ("blob=hex:0a0b", "data"),
        ] {
            try cli.ok(defaults + ["--set", assignment, "--type", type])
        }
        let listed = try cli.ok(defaults + ["--list"]).text
        for line in ["launches=3", "ratio=0.5", "onboarded=true", "when=2026-01-02T03:04:05Z", "blob=hex:0a0b"] {
            #expect(listed.contains(line + "\n"), "\(line) in \(listed)")
        }
        let wrong = try cli.run(defaults + ["--set", "launches=many", "--type", "int"])
        #expect(wrong.status == 64 && wrong.stderr.contains("'many' is not an int value"), "\(wrong.stderr)")
        #expect(try cli.ok(defaults + ["--get", "launches"]).text == "3\n", "a refused value changes nothing")
        try cli.ok(defaults + ["--remove", "launches"])
        #expect(try cli.run(defaults + ["--get", "launches"]).status == 5)
    }

    @Test("an app installed without a keychain entitlement gets errSecMissingEntitlement on every call, and says so when listed")
    func withoutKeychainEntitlement() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let installed = try cli.ok(["app", "install", dir, "--app", "com.example.unsigned", "--team", "ABCDE12345", "--no-keychain-entitlement"])
        #expect(installed.text.contains("without a keychain entitlement"), "\(installed.text)")
        let unsigned = ["--app", "com.example.unsigned", "--account", "a"]
        for call in [["item", "add", dir] + unsigned + ["--value", "v"], ["item", "get", dir] + unsigned, ["item", "delete", dir] + unsigned] {
            let refused = try cli.run(call + ["--json"])
            let status = try refused.object()["status"] as? Int
            #expect(refused.status == 3 && status == -34018, "\(call[1]): \(refused.stderr)")
        }
        #expect(try cli.ok(["app", "list", dir]).text.contains("com.example.unsigned  team ABCDE12345  no keychain entitlement"))
        let listed = try #require(try cli.ok(["app", "list", dir, "--json"]).json() as? [[String: Any]])
        #expect(listed.first { $0["bundleID"] as? String == "com.example.unsigned" }?["keychainEntitlement"] as? Bool == false)
        // Installed again with one, it reaches its own group.
        try cli.ok(["app", "install", dir, "--app", "com.example.unsigned", "--team", "ABCDE12345"])
        try cli.ok(["item", "add", dir] + unsigned + ["--value", "v"])
    }

    @Test("app groups: --extension-of installs a widget, --app-group reaches the shared suite and files, and the app's uninstall takes both")
    func appGroups() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let group = ["--app-group", "group.com.example.mail"]
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345", "--group", "group.com.example.mail"])
        let orphan = try cli.run(["app", "install", dir, "--app", "com.example.widget", "--team", "ABCDE12345", "--extension-of", "com.example.mail"])
        #expect(orphan.status != 0 && orphan.stderr.contains("starts with its app's"), "\(orphan.stderr)")
        let widget = ["--app", "com.example.mail.widget"]
        try cli.ok(["app", "install", dir] + widget + ["--team", "ABCDE12345", "--group", "group.com.example.mail", "--extension-of", "com.example.mail"])
        #expect(try cli.ok(["app", "list", dir]).text.contains("extension of com.example.mail"))
        try cli.ok(["app", "defaults", dir] + app + group + ["--set", "signedInUser=alice"])
        #expect(try cli.ok(["app", "defaults", dir] + widget + group + ["--get", "signedInUser"]).text == "alice\n")
        #expect(try cli.run(["app", "defaults", dir] + widget + ["--get", "signedInUser"]).status != 0, "the widget's own defaults are its own")
        try cli.ok(["app", "file", dir] + app + group + ["--write", "timeline.json", "--text", "[]"])
        #expect(try cli.ok(["app", "file", dir] + widget + group + ["--list"]).text.contains("group.com.example.mail/timeline.json"))
        try cli.ok(["app", "install", dir, "--app", "com.example.other", "--team", "ABCDE12345"])
        let stranger = try cli.run(["app", "file", dir] + ["--app", "com.example.other"] + group + ["--list"])
        #expect(stranger.status != 0 && stranger.stderr.contains("not entitled to the app group"), "\(stranger.stderr)")
        let alone = try cli.run(["app", "uninstall", dir] + widget)
        #expect(alone.status != 0 && alone.stderr.contains("goes when com.example.mail is uninstalled"), "\(alone.stderr)")
        try cli.ok(["app", "uninstall", dir] + app)
        #expect(try cli.ok(["app", "list", dir]).text.hasPrefix("com.example.other "), "the widget went with its app")
    }

    @Test("item get prints the secret's bytes exactly; list, JSON and the log never show it")
    func secretsRoundTrip() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let secret = Data([0x73, 0x33, 0x00, 0x0a, 0xff, 0x21])  // a NUL, a newline, invalid UTF-8
        let file = cli.root.appendingPathComponent("secret.bin")
        try secret.write(to: file)
        try cli.ok(["item", "add", dir] + app + ["--account", "alice", "--service", "mail", "--value-file", file.path])
        try cli.ok(
            ["item", "add", dir] + app + [
                "--class", "internetPassword", "--server", "example.com", "--protocol", "htps",
                "--port", "443", "--account", "bob", "--value-stdin",
            ], stdin: Data("hunter2-marker".utf8))

        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "alice", "--service", "mail"]).stdout == secret)
        let inet =
            try cli.ok(
                ["item", "get", dir] + app + [
                    "--class", "internetPassword", "--server", "example.com",
                    "--return", "both", "--json",
                ]
            ).json() as? [[String: Any]]
        #expect(inet?.first?["text"] as? String == "hunter2-marker")
        #expect((inet?.first?["attributes"] as? [String: Any])?["port"] as? Int == 443)

        let listing = try cli.ok(["item", "list", dir, "--json"])
        #expect(try (listing.object()["items"] as? [Any])?.count == 2)
        #expect(!listing.text.contains("hunter2"))
        let log = try String(contentsOfFile: dir + "/node.log", encoding: .utf8)
        #expect(!log.contains("hunter2") && !log.contains("123456"))
    }

    @Test("an App ID prefix other than the team ID names the app's own group; an update that drops a group no app holds says which items it orphans")
    func appIdentity() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let legacy = ["--app", "com.example.legacy"]
        try cli.ok(["app", "install", dir] + legacy + ["--team", "ABCDE12345", "--app-id-prefix", "Q9XYZ12345"])
        try cli.ok(["item", "add", dir] + legacy + ["--account", "a", "--value", "x", "--accessible", "afterFirstUnlock"])
        let listed = try cli.ok(["item", "list", dir, "--json"]).object()["items"] as? [[String: Any]]
        #expect(listed?.first?["accessGroup"] as? String == "Q9XYZ12345.com.example.legacy")
        #expect(try cli.ok(["app", "list", dir]).text.contains("com.example.legacy  team ABCDE12345  App ID prefix Q9XYZ12345"))
        #expect(try cli.run(["app", "install", dir] + legacy + ["--team", "ABCDE12345", "--app-id-prefix", "q9"]).status == 64)

        try cli.ok(["app", "install", dir] + app + ["--team", "ABCDE12345", "--group", "ABCDE12345.shared"])
        try cli.ok(["item", "add", dir] + app + ["--account", "s", "--value", "x", "--group", "ABCDE12345.shared", "--accessible", "afterFirstUnlock"])
        let update = try cli.ok(["app", "install", dir] + app + ["--team", "ABCDE12345", "--json"])
        #expect(update.stderr.contains("no longer reaches ABCDE12345.shared, and no other app does: its 1 item stays"), "\(update.stderr)")
        #expect((try update.object()["orphaned"] as? [String: Int]) == ["ABCDE12345.shared": 1])
        let again = try cli.ok(["app", "install", dir] + app + ["--team", "ABCDE12345", "--group", "ABCDE12345.shared", "--json"])
        #expect((try again.object()["orphaned"] as? [String: Int]) == [:], "entitled again, it reaches them")
    }

    @Test("--persistent-ref finds, updates and deletes the one item it names, whatever --class says; a malformed one is a usage mistake")
    func persistentReferences() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir] + app + ["--account", "alice", "--value", "one", "--accessible", "afterFirstUnlock"])
        try cli.ok(["item", "add", dir] + app + ["--account", "bob", "--value", "other", "--accessible", "afterFirstUnlock"])
        let listed = try cli.ok(["item", "get", dir] + app + ["--account", "alice", "--return", "attributes", "--json"]).json() as? [[String: Any]]
        let reference = try #require(listed?.first?["persistentRef"] as? String)

        #expect(try cli.ok(["item", "get", dir] + app + ["--persistent-ref", reference]).text == "one")
        #expect(try cli.ok(["item", "update", dir] + app + ["--persistent-ref", reference, "--set-value", "two"]).text.contains("updated 1 item"))
        #expect(try cli.ok(["item", "get", dir] + app + ["--class", "key", "--persistent-ref", reference]).text == "two", "the reference names its class")
        #expect(try cli.ok(["item", "delete", dir] + app + ["--persistent-ref", reference]).text.contains("deleted 1 item"))
        #expect(try cli.run(["item", "get", dir] + app + ["--persistent-ref", reference]).status == 3)
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "bob"]).text == "other", "the other item is untouched")

        let malformed = try cli.run(["item", "delete", dir] + app + ["--persistent-ref", "bm90IGEgcmVm"])
        #expect(malformed.status == 64 && malformed.stderr.contains("not a persistent reference Keyferry made"), "\(malformed.stderr)")
    }

    @Test("lock with a grace period, then reboot: which classes stay readable (seed 001 scenarios 1, 2, 6)")
    func lockGraceAndReboot() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone", extra: ["--grace", "60"])
        for (account, accessible) in [("fg", "whenUnlocked"), ("bg", "afterFirstUnlock"), ("always", "always")] {
            try cli.ok(["item", "add", dir] + app + ["--account", account, "--accessible", accessible, "--value", "v-\(account)"])
        }
        func read(_ account: String) throws -> CLI.Result { try cli.run(["item", "get", dir] + app + ["--account", account]) }

        try cli.ok(["device", "lock", dir])
        #expect(try read("fg").text == "v-fg", "class A keys stay during the grace period")
        // The grace period passes on the device's clock, however slowly this machine runs.
        try cli.ok(["device", "clock", dir, "--advance", "61s"])
        #expect(try cli.status(dir)["protectedDataAvailable"] as? Bool == false)
        #expect(try read("fg").stderr.hasPrefix("errSecInteractionNotAllowed (-25308)"))
        #expect(try read("bg").text == "v-bg")

        try cli.ok(["node", "reboot", dir])
        #expect(try cli.status(dir)["lockState"] as? String == "bfu")
        #expect(try read("bg").status == 3)
        #expect(try read("always").text == "v-always")
    }

    @Test("delete succeeds while locked, so 'cannot read, so delete' destroys a good item (seed 000)")
    func deleteWhileLocked() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir] + app + ["--account", "token", "--value", "t"])
        try cli.ok(["device", "lock", dir, "--now"])
        #expect(try cli.run(["item", "get", dir] + app + ["--account", "token"]).status == 3)
        try cli.ok(["item", "delete", dir] + app + ["--account", "token"])
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        #expect(try cli.run(["item", "get", dir] + app + ["--account", "token"]).stderr.hasPrefix("errSecItemNotFound (-25300)"))
    }

    @Test("removing the passcode destroys whenPasscodeSetThisDeviceOnly items; a biometry change locks biometryCurrentSet")
    func passcodeAndBiometry() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone", extra: ["--biometry"])
        try cli.ok(
            ["item", "add", dir] + app + [
                "--account", "vault", "--accessible", "whenPasscodeSetThisDeviceOnly",
                "--access-control", "biometryCurrentSet", "--value", "v",
            ])
        try cli.ok(["item", "add", dir] + app + ["--account", "plain", "--value", "p"])
        let get = ["item", "get", dir] + app + ["--account", "vault"]
        #expect(try cli.run(get + ["--auth", "none"]).stderr.hasPrefix("errSecInteractionNotAllowed"))
        #expect(try cli.ok(get + ["--auth", "match"]).text == "v")
        #expect(try cli.run(get + ["--auth", "cancel"]).stderr.hasPrefix("errSecUserCanceled (-128)"))
        // An update asks as a read does.
        let update = ["item", "update", dir] + app + ["--account", "vault", "--set-value", "w"]
        #expect(try cli.run(update).stderr.hasPrefix("errSecInteractionNotAllowed"))
        #expect(try cli.run(update + ["--auth", "nomatch"]).stderr.hasPrefix("errSecAuthFailed"))
        try cli.ok(update + ["--auth", "match"])
        #expect(try cli.ok(get + ["--auth", "match"]).text == "w")
        // Every item at once, without the one that would need a prompt.
        let all = ["item", "get", dir] + app + ["--limit", "all", "--return", "both"]
        #expect(try cli.run(all + ["--auth", "none"]).stderr.hasPrefix("errSecInteractionNotAllowed"), "one prompt fails them all")
        let skipped = try cli.ok(all + ["--auth", "skip"]).text
        #expect(skipped.contains("account=plain") && !skipped.contains("account=vault"), "\(skipped)")

        try cli.ok(["device", "biometry", dir, "--change"])
        #expect(try cli.run(get + ["--auth", "match"]).stderr.hasPrefix("errSecAuthFailed (-25293)"))

        try cli.ok(["device", "passcode", dir, "--remove", "--current", "123456"])
        #expect(try cli.run(get + ["--auth", "match"]).stderr.hasPrefix("errSecItemNotFound"))
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "plain"]).text == "p")
    }

    @Test("phantom mismatch, rename by update, and reinstall keeping items but not the sandbox (seed 000)")
    func phantomRenameReinstall() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir] + app + ["--account", "a", "--service", "old", "--accessible", "afterFirstUnlock", "--value", "x"])
        let phantom = try cli.run(["item", "get", dir] + app + ["--account", "a", "--service", "old", "--accessible", "whenUnlocked"])
        #expect(phantom.stderr.hasPrefix("errSecItemNotFound"))
        let again = try cli.run(["item", "add", dir] + app + ["--account", "a", "--service", "old", "--value", "y"])
        #expect(again.stderr.hasPrefix("errSecDuplicateItem (-25299)"))

        try cli.ok(["item", "update", dir] + app + ["--service", "old", "--set-service", "new"])
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "a", "--service", "new"]).text == "x")

        try cli.ok(["app", "defaults", dir, "--app", "com.example.mail", "--set", "hasLaunched=yes"])
        try cli.ok(["app", "uninstall", dir, "--app", "com.example.mail"])
        #expect(try cli.ok(["item", "list", dir]).text.contains("account=a"))
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345"])
        #expect(try cli.ok(["app", "defaults", dir, "--app", "com.example.mail", "--list", "--json"]).object().isEmpty)
        #expect(try cli.ok(["item", "get", dir] + app + ["--account", "a", "--service", "new"]).text == "x")
    }

    @Test("sandbox files: written, listed, read byte for byte, protected while locked, removed; bad paths and sizes refused")
    func sandboxFiles() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let file = ["app", "file", dir, "--app", "com.example.mail"]
        let bytes = Data([0, 0xff, 0x0a, 0x80])
        let binary = cli.path("blob.bin")
        try bytes.write(to: URL(fileURLWithPath: binary))
        try cli.ok(file + ["--write", "TokenCache.dat", "--text", "legacy"])
        try cli.ok(file + ["--write", "Vault/blob.bin", "--from", binary, "--protection", "complete"])
        let listed = try #require(try cli.ok(file + ["--list", "--json"]).json() as? [[String: Any]])
        #expect(listed.map { $0["path"] as? String } == ["TokenCache.dat", "Vault/blob.bin"])
        #expect(listed.map { $0["protection"] as? String } == ["completeUntilFirstUserAuthentication", "complete"])
        #expect(listed.map { $0["bytes"] as? Int } == [6, 4])
        #expect(try cli.ok(file + ["--read", "Vault/blob.bin"]).stdout == bytes)
        #expect(try cli.ok(file + ["--read", "Vault/blob.bin", "--json"]).object()["base64"] as? String == bytes.base64EncodedString())

        try cli.ok(["device", "lock", dir, "--now"])
        let locked = try cli.run(file + ["--read", "Vault/blob.bin"])
        #expect(locked.status == 6 && locked.stderr.contains("is complete and cannot be read"), "\(locked.stderr)")
        #expect(try cli.ok(file + ["--read", "TokenCache.dat"]).text == "legacy")
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])

        for (arguments, problem) in [
            (["--write", "../escape", "--text", "x"], "is not a path inside Documents"),
            (["--read", "missing.txt"], "has no file Documents/missing.txt"),
            (["--write", "a", "--text", "x", "--protection", "sometimes"], "not a file protection class"),
            (["--write", "a"], "exactly one of --text or --from"),
            (["--read", "a", "--text", "x"], "go with --write"),
        ] {
            let run = try cli.run(file + arguments)
            #expect(run.status != 0 && run.stderr.contains(problem), "\(arguments): \(run.stderr)")
        }
        let big = cli.path("big.bin")
        try Data(count: 5 << 20).write(to: URL(fileURLWithPath: big))
        let tooBig = try cli.run(file + ["--write", "big.bin", "--from", big])
        #expect(tooBig.status != 0 && tooBig.stderr.contains("larger than a file Keyferry writes in one call"), "\(tooBig.stderr)")
        #expect(try #require(try cli.ok(file + ["--list", "--json"]).json() as? [[String: Any]]).count == 2, "nothing written by a refusal")

        try cli.ok(file + ["--remove", "TokenCache.dat"])
        #expect(try cli.run(file + ["--read", "TokenCache.dat"]).stderr.contains("has no file"))
        #expect(try cli.run(file + ["--remove", "TokenCache.dat"]).stderr.contains("has no file"))
        // Uninstalling wipes the sandbox.
        try cli.ok(["app", "uninstall", dir, "--app", "com.example.mail"])
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345"])
        #expect(try #require(try cli.ok(file + ["--list", "--json"]).json() as? [[String: Any]]).isEmpty)
    }

    @Test("--attr takes Apple's names, with or without kSecAttr, its short codes, and named values: keyType is a key's type")
    func attributeSpellings() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(
            ["item", "add", dir] + app + [
                "--class", "key", "--attr", "keyType=kSecAttrKeyTypeRSA", "--attr", "kSecAttrKeyClass=kSecAttrKeyClassPrivate",
                "--attr", "atag=hex:0a0b", "--attr", "keySizeInBits=2048", "--attr", "canSign=true", "--value", "k",
            ])
        // Text shows each value as --attr takes it back: a name, a number, a boolean.
        let headline = try cli.ok(["item", "list", dir] + app).text
        #expect(headline.contains("keyType=kSecAttrKeyTypeRSA") && headline.contains("keySizeInBits=2048") && headline.contains("canSign=true"), "\(headline)")
        for spelling in [["--attr", "keyType=42"], ["--attr", "kSecAttrKeyType=kSecAttrKeyTypeRSA"], ["--attr", "type=42"]] {
            let found = try cli.ok(["item", "get", dir] + app + ["--class", "key", "--attr", "applicationTag=hex:0a0b"] + spelling)
            #expect(found.text == "k", "\(spelling)")
        }
        // Named values by name in JSON too, as text shows them.
        let listed = try cli.ok(["item", "list", dir] + app + ["--json"]).object()
        let attributes = ((listed["items"] as? [[String: Any]])?.first?["attributes"] as? [String: Any]) ?? [:]
        #expect(attributes["keyType"] as? String == "kSecAttrKeyTypeRSA" && attributes["keyClass"] as? String == "kSecAttrKeyClassPrivate", "\(attributes)")
        let other = try cli.run(["item", "get", dir] + app + ["--class", "key", "--attr", "keyType=kSecAttrKeyTypeECSECPrimeRandom"])
        #expect(other.status == 3 && other.stderr.contains("errSecItemNotFound"), "\(other.stderr)")
    }

    @Test("an account stored as data (as apps that pass it as Data do) is reached with --attr account=hex:, shown as hex, and is not the string it spells")
    func dataAccount() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir] + app + ["--attr", "account=hex:616c696365", "--service", "mail", "--value", "d"])
        let found = try cli.ok(["item", "get", dir] + app + ["--attr", "account=hex:616c696365", "--service", "mail"])
        #expect(found.text == "d")
        let listed = try cli.ok(["item", "list", dir] + app)
        #expect(listed.text.contains("account=hex:616c696365"), "\(listed.text)")
        let byString = try cli.run(["item", "get", dir] + app + ["--account", "alice", "--service", "mail"])
        #expect(byString.status == 3 && byString.stderr.contains("errSecItemNotFound"), "\(byString.stderr)")
    }

    @Test(
        "key create keeps a key as SecKeyCreateRandomKey with kSecAttrIsPermanent does, prints a public key openssl reads, refuses sizes no curve or RSA key has, and makes Secure Enclave keys the survival matrix keeps on the device"
    )
    func keyCreate() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let made = try cli.ok(["key", "create", dir] + app + ["--type", "ec", "--bits", "384", "--tag", "com.example.signing", "--json"]).object()
        let pem = try #require(made["publicKey"] as? String)
        let pemFile = cli.root.appendingPathComponent("public.pem")
        try Data(pem.utf8).write(to: pemFile)
        let described = try openssl(["pkey", "-pubin", "-in", pemFile.path, "-noout", "-text"])
        #expect(described.contains("384 bit"), "\(described)")
        let found = try cli.ok(["item", "list", dir] + app)
        #expect(found.text.contains("applicationTag=com.example.signing") && found.text.contains("keySizeInBits=384"), "\(found.text)")
        for bad in [["--type", "ec", "--bits", "512"], ["--type", "rsa", "--bits", "1024"], ["--type", "rsa", "--bits", "3000"]] {
            let refused = try cli.run(["key", "create", dir] + app + bad + ["--tag", "x"])
            #expect(refused.status == 64 && refused.stderr.contains("--bits"), "\(refused.stderr)")
        }

        // A Secure Enclave key, of a class that migrates: the survival matrix loses it on every
        // path off the device, and says why.
        try cli.ok(
            ["key", "create", dir] + app + ["--secure-enclave", "--tag", "com.example.enclave", "--label", "enclave", "--accessible", "afterFirstUnlock"])
        let matrix = try cli.ok(["survival", dir, "--json"]).object()
        for path in ["encrypted-backup-new-device", "quick-start", "icloud-keychain"] {
            let cell = try #require(SurvivalCLITests.cell(matrix, "enclave", path), "\(path)")
            #expect(cell["outcome"] as? String == "lost", "\(path)")
            #expect((cell["reason"] as? String)?.hasPrefix("a Secure Enclave key never leaves") == true, "\(path): \(cell)")
        }
        let rsa = try cli.run(["key", "create", dir] + app + ["--secure-enclave", "--type", "rsa", "--tag", "x"])
        #expect(rsa.status == 64 && rsa.stderr.contains("P-256"), "\(rsa.stderr)")
    }

    @Test(
        "item add takes a certificate from its DER and an identity from openssl's .p12; a wrong password is errSecAuthFailed and adds nothing; the survival matrix has their rows"
    )
    func certificatesAndIdentities() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let work = cli.root.path
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(work)/key.pem", "-out", "\(work)/cert.pem",
            "-days", "2", "-subj", "/CN=Alice Client",
        ])
        try openssl(["x509", "-in", "\(work)/cert.pem", "-outform", "DER", "-out", "\(work)/cert.der"])
        try openssl([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(work)/ca.key", "-out", "\(work)/ca.pem", "-days", "2", "-subj", "/CN=Pinned CA",
        ])
        try openssl(["x509", "-in", "\(work)/ca.pem", "-outform", "DER", "-out", "\(work)/ca.der"])
        try openssl([
            "pkcs12", "-export", "-inkey", "\(work)/key.pem", "-in", "\(work)/cert.pem", "-name", "Alice", "-passout", "pass:s3cret", "-out",
            "\(work)/alice.p12",
        ])
        try "s3cret\n".write(toFile: "\(work)/password", atomically: true, encoding: .utf8)
        try "wrong\n".write(toFile: "\(work)/wrong", atomically: true, encoding: .utf8)

        let pinned = try #require(
            try cli.ok(["item", "add", dir] + app + ["--class", "certificate", "--from", "\(work)/ca.der", "--label", "pinned CA", "--json"]).json()
                as? [[String: Any]])
        #expect((pinned.first?["attributes"] as? [String: Any])?["certificateType"] as? Int == 3, "\(pinned)")
        // Its subject as SecCertificateCopySubjectSummary gives it, beside the DER.
        #expect(pinned.first?["subjectSummary"] as? String == "Pinned CA", "\(pinned)")
        #expect(try cli.ok(["item", "list", dir] + app).text.contains("subjectSummary=Pinned CA"))
        let refused = try cli.run(["item", "add", dir] + app + ["--class", "identity", "--p12", "\(work)/alice.p12", "--password-file", "\(work)/wrong"])
        #expect(refused.status == 4 && refused.stderr.contains("errSecAuthFailed"), "\(refused.stderr)")
        #expect(try cli.ok(["item", "list", dir] + app + ["--json"]).text.contains("Alice") == false, "nothing added")
        let added = try cli.ok(["item", "add", dir] + app + ["--class", "identity", "--p12", "\(work)/alice.p12", "--password-file", "\(work)/password"])
        #expect(added.text.contains("identity Alice Client: certificate and P-256 private key"), "\(added.text)")
        let identity = try cli.ok(["item", "get", dir] + app + ["--class", "identity", "--label", "Alice", "--return", "attributes"])
        #expect(identity.text.contains("identity"), "\(identity.text)")

        let pem = try cli.run(["item", "add", dir] + app + ["--class", "certificate", "--from", "\(work)/cert.pem"])
        #expect(pem.status != 0 && pem.stderr.contains("not a DER X.509 certificate"), "\(pem.stderr)")
        let noP12 = try cli.run(["item", "add", dir] + app + ["--class", "identity", "--value", "x"])
        #expect(noP12.status == 64 && noP12.stderr.contains("--p12"), "\(noP12.stderr)")

        let matrix = try cli.ok(["survival", dir, "--json"]).object()
        #expect(SurvivalCLITests.cell(matrix, "pinned CA", "encrypted-backup-new-device")?["outcome"] as? String == "kept")
        #expect(SurvivalCLITests.cell(matrix, "Alice", "encrypted-backup-new-device")?["outcome"] as? String == "kept")
        let rows = (matrix["rows"] as? [[String: Any]] ?? []).filter { $0["name"] as? String == "Alice" }
        #expect(Set(rows.compactMap { $0["itemClass"] as? String }) == ["certificate", "key"], "\(rows)")
    }

    @Test("a node killed with SIGKILL in the middle of writes restarts before first unlock with every committed item")
    func sigkillMidWrite() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let pid = try #require(try cli.ok(["node", "status", dir, "--json"]).object()["pid"] as? Int)
        // A writer adding items one by one, recording each add the node confirmed.
        let committed = cli.root.appendingPathComponent("committed.txt")
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/sh")
        writer.arguments = [
            "-c",
            """
            for i in $(seq 1 1000); do
              "$0" item add "$1" --app com.example.mail --account "acct-$i" --value "v$i" 2>/dev/null && echo "$i" >> "$2"
            done
            """, cli.binary.path, dir, committed.path,
        ]
        try writer.run()
        func confirmed() -> [String] {
            ((try? String(contentsOf: committed, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        // Polled from this thread, not a task: the other tests keep the cooperative pool busy.
        let deadline = Date().addingTimeInterval(60)
        while confirmed().count < 10 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        ProcessControl.send(.kill, to: Int32(pid))
        writer.terminate()
        writer.waitUntilExit()
        let survivors = confirmed()
        #expect(survivors.count >= 10 && survivors.count < 1000, "the kill landed mid-write")

        try cli.ok(["node", "start", dir])
        #expect(try cli.status(dir)["lockState"] as? String == "bfu")
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        let count = try #require(try cli.status(dir)["itemCount"] as? Int)
        // Every confirmed add is there; at most the one in flight when the node died got in unconfirmed.
        #expect(count == survivors.count || count == survivors.count + 1)
        for i in survivors {
            #expect(try cli.ok(["item", "get", dir] + app + ["--account", "acct-\(i)"]).text == "v\(i)")
        }
    }
}
