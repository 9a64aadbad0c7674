import Foundation
import KeychainTesting
import KeyferrySystem
import Testing

@Suite("keyferry circle and sync", .blocking)
struct SyncCLITests {
    /// Every synchronizable item a node's app sees: account and secret.
    private func synced(_ cli: CLI, _ dir: String) throws -> [String: String] {
        let listed = try cli.ok(["item", "list", dir, "--app", "com.example.mail", "--json"]).object()["items"] as? [[String: Any]] ?? []
        var items: [String: String] = [:]
        for item in listed where item["synchronizable"] as? Bool == true && item["accessible"] as? String == "whenUnlocked" {
            let account = try #require((item["attributes"] as? [String: Any])?["account"] as? String)
            items[account] = try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", account, "--sync", "yes"]).text
        }
        return items
    }

    @Test("three nodes and a relay: adds, an update, a rename and a delete on different nodes reach every node, in their access group; local items stay home")
    func threeNodes() throws {
        let cli = try CLI()
        let (_, line) = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json"])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
        let nodes = try ["phone", "tablet", "laptop"].map { try cli.poweredDevice($0) }
        let (phone, tablet, laptop) = (nodes[0], nodes[1], nodes[2])
        try cli.ok(["circle", "create", phone, "--relay", relay])
        try cli.ok(["circle", "join", tablet, "--sponsor", phone])
        let status = try cli.ok(["circle", "join", laptop, "--sponsor", tablet, "--json"]).object()
        #expect((status["members"] as? [Any])?.count == 3)

        func add(_ dir: String, _ account: String, _ value: String, extra: [String] = []) throws {
            try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", account, "--value", value] + extra)
        }
        func syncAll() throws { for _ in 0..<2 { for node in nodes { try cli.ok(["sync", "now", node]) } } }
        try add(phone, "alice", "from-phone", extra: ["--sync"])
        try add(tablet, "bob", "from-tablet", extra: ["--sync"])
        try add(laptop, "carol", "from-laptop", extra: ["--sync"])
        try add(phone, "phone-local", "stays")
        try add(phone, "phone-bound", "stays", extra: ["--sync", "--accessible", "afterFirstUnlockThisDeviceOnly"])
        try syncAll()
        try cli.ok(["item", "update", tablet, "--app", "com.example.mail", "--account", "alice", "--sync", "yes", "--set-value", "edited-on-tablet"])
        try cli.ok(["item", "update", laptop, "--app", "com.example.mail", "--account", "bob", "--sync", "yes", "--set-account", "robert"])
        try cli.ok(["item", "delete", phone, "--app", "com.example.mail", "--account", "carol", "--sync", "yes"])
        try syncAll()

        let expected = ["alice": "edited-on-tablet", "robert": "from-tablet"]
        for node in nodes {
            #expect(try synced(cli, node) == expected, "\(node)")
        }
        // The item keeps its access group: on the laptop, an app of another team does not see it.
        try cli.ok(["app", "install", laptop, "--app", "com.other.reader", "--team", "ZZZZZ99999"])
        let foreign = try cli.run(["item", "get", laptop, "--app", "com.other.reader", "--account", "alice", "--sync", "yes"])
        #expect(foreign.status == 3 && foreign.stderr.contains("errSecItemNotFound"), "\(foreign.stderr)")
        for node in [tablet, laptop] {
            for account in ["phone-local", "phone-bound"] {
                let found = try cli.run(["item", "get", node, "--app", "com.example.mail", "--account", account, "--sync", "any"])
                #expect(found.status == 3 && found.stderr.contains("errSecItemNotFound"), "\(account) reached \(node)")
            }
        }
        let syncStatus = try cli.ok(["sync", "status", phone, "--json"]).object()
        #expect(syncStatus["skippedDeviceBound"] as? [String] == ["phone-bound"])
        #expect(syncStatus["pending"] as? Int == 0)
        // Each author's batches as received: the tablet's and the laptop's, none missing.
        let received = try #require(syncStatus["received"] as? [[String: Any]])
        #expect(Set(received.compactMap { $0["name"] as? String }) == ["tablet", "laptop"])
        #expect(received.allSatisfy { ($0["head"] as? Int ?? 0) >= 1 && ($0["missing"] as? [String]) == [] }, "\(received)")
        let text = try cli.ok(["sync", "status", phone]).text
        #expect(text.contains("received tablet's batches through #") && !text.contains("MISSING"), "\(text)")

        // The laptop is removed: what the phone writes next reaches the tablet only.
        let removed = try cli.ok(["circle", "remove", phone, "--peer", "laptop", "--json"]).object()
        #expect(removed["epoch"] as? Int == 2 && (removed["members"] as? [Any])?.count == 2)
        try add(phone, "dave", "after-removal", extra: ["--sync"])
        try cli.ok(["sync", "now", phone])
        try cli.ok(["sync", "now", tablet])
        #expect(try synced(cli, tablet)["dave"] == "after-removal")
        let refused = try cli.run(["sync", "now", laptop])
        #expect(refused.status == 1 && refused.stderr.contains("removed"), "\(refused.stderr)")
        #expect(try synced(cli, laptop)["dave"] == nil)
    }

    @Test("circle commands refuse what cannot be done, and leave the nodes as they were")
    func badInput() throws {
        let cli = try CLI()
        let phone = try cli.poweredDevice("phone")
        let tablet = try cli.poweredDevice("tablet")
        let noCircle = try cli.run(["circle", "join", tablet, "--sponsor", phone])
        #expect(noCircle.status == 5 && noCircle.stderr.contains("in no circle"), "\(noCircle.stderr)")
        let badRelay = try cli.run(["circle", "create", phone, "--relay", "not a url"])
        #expect(badRelay.status == 64 && badRelay.stderr.contains("http://HOST:PORT"), "\(badRelay.stderr)")
        let syncAlone = try cli.run(["sync", "now", phone])
        #expect(syncAlone.status == 5 && syncAlone.stderr.contains("in no circle"), "\(syncAlone.stderr)")
        #expect(try cli.ok(["circle", "status", phone]).text.contains("in no circle"))
        #expect(!FileManager.default.fileExists(atPath: phone + "/sync.json"))
        let stopped = cli.path("stopped")
        try cli.ok(["device", "init", stopped])
        // A powered-off device answers from what it remembers: here, no circle.
        let notRunning = try cli.run(["circle", "status", stopped])
        #expect(notRunning.status == 0 && notRunning.text.contains("in no circle"), "\(notRunning.stderr)")
    }

    @Test("fleet up starts the relay and puts every device in one circle; nodes then sync on their own; down stops the relay")
    func fleetSync() async throws {
        let cli = try CLI()
        // A port that was free a moment ago, for the fleet's relay.
        let (probe, line) = try cli.start(["relay", "serve", "--data", cli.path("probe"), "--listen", "127.0.0.1:0"])
        let port = try #require(line.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) })
        probe.terminate()
        probe.waitUntilExit()
        let file = cli.root.appendingPathComponent("pair.yaml")
        try """
        fleet: pair
        sync:
          relay: 127.0.0.1:\(port)
        apps:
          com.example.mail: {team: ABCDE12345}
        devices:
          one: {passcode: "1111", apps: [com.example.mail]}
          two: {passcode: "2222", apps: [com.example.mail]}
        """.write(to: file, atomically: true, encoding: .utf8)
        let root = cli.path("fleet")
        let up = try cli.ok(["fleet", "up", file.path, "--root", root, "--json"]).object()
        let circles = Set([up["circle"] as? String].compactMap { $0 })
        let members = up["members"] as? [[String: Any]] ?? []
        #expect(members.count == 2 && circles.count == 1 && up["relayStarted"] as? Bool == true)
        #expect(members.map { $0["joinedCircle"] as? Bool } == [true, true])
        try cli.ok(["item", "add", root + "/one", "--app", "com.example.mail", "--account", "otp", "--value", "123456", "--sync"])
        // No `sync now`: the nodes sync every second on their own.
        #expect(try await arrival(cli, root + "/two", "otp") == "123456")
        let again = try cli.ok(["fleet", "up", file.path, "--root", root]).text
        #expect(again.contains("every device is in circle \(circles.first ?? "")"))
        try cli.ok(["fleet", "down", file.path, "--root", root])
        #expect(!FileManager.default.fileExists(atPath: root + "/relay/relay.json"), "the relay stopped")
        // Powered off, a member still says which circle it is in, as it last read it.
        let statusAfter = try cli.ok(["circle", "status", root + "/two", "--json"]).object()
        #expect(statusAfter["poweredOff"] as? Bool == true && (statusAfter["members"] as? [Any])?.count == 2, "\(statusAfter)")
        #expect(statusAfter["circle"] as? String == circles.first, "the circle it was in")

        // Restarted and not yet unlocked, a member still says when it last synced something.
        try cli.ok(["node", "start", root + "/two"])
        let restarted = try cli.ok(["sync", "status", root + "/two"]).text
        #expect(restarted.contains("last exchange: none since the node started; the last that moved something was 20"), "\(restarted)")

        // Up again: every device powers on before first unlock with its sync sealed (two was
        // started above), is unlocked by the fleet, and syncs both ways.
        let back = try cli.ok(["fleet", "up", file.path, "--root", root, "--json"]).object()
        let backMembers = back["members"] as? [[String: Any]] ?? []
        #expect(backMembers.map { $0["started"] as? Bool } == [true, false] && Set([back["circle"] as? String].compactMap { $0 }) == circles)
        #expect(back["relayStarted"] as? Bool == true && backMembers.map { $0["joinedCircle"] as? Bool } == [false, false])
        try await expectSyncBothWays(cli, root + "/one", root + "/two", after: "up-again")

        // A node killed outright: `fleet up` starts it again, unlocks it, and it syncs both ways.
        let pid = try #require(try cli.ok(["node", "status", root + "/two", "--json"]).object()["pid"] as? Int)
        ProcessControl.send(.kill, to: Int32(pid))
        while ProcessControl.isAlive(Int32(pid)) { try await Task.sleep(for: .milliseconds(10)) }
        let repaired = try cli.ok(["fleet", "up", file.path, "--root", root, "--json"]).object()
        #expect(
            (repaired["members"] as? [[String: Any]] ?? []).map { $0["started"] as? Bool } == [false, true]
                && Set([repaired["circle"] as? String].compactMap { $0 }) == circles)
        try await expectSyncBothWays(cli, root + "/one", root + "/two", after: "kill")

        // The relay killed and a member out of the circle: `fleet up` repairs both, and says so.
        let announced = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: root + "/relay/relay.json"))) as? [String: Any]
        let relayPID = try #require(announced?["pid"] as? Int)
        ProcessControl.send(.kill, to: Int32(relayPID))
        while ProcessControl.isAlive(Int32(relayPID)) { try await Task.sleep(for: .milliseconds(10)) }
        try cli.ok(["circle", "leave", root + "/two", "--force"])
        let status = try cli.ok(["fleet", "status", file.path, "--root", root]).text
        #expect(status.contains("not running") && status.contains("circle"), "\(status)")
        let fixed = try cli.ok(["fleet", "up", file.path, "--root", root]).text
        #expect(fixed.contains("started the fleet's relay at") && fixed.contains("two joined circle"), "\(fixed)")
        try await expectSyncBothWays(cli, root + "/one", root + "/two", after: "repair")

        // A member removed by another: once it has read its removal, `fleet up` brings it back.
        try cli.ok(["circle", "remove", root + "/one", "--peer", "two"])
        while try cli.ok(["circle", "status", root + "/two", "--json"]).object()["removed"] as? Bool != true {
            try await Task.sleep(for: .milliseconds(50))
        }
        let rejoined = try cli.ok(["fleet", "up", file.path, "--root", root]).text
        #expect(rejoined.contains("two joined circle"), "\(rejoined)")
        #expect(try cli.ok(["circle", "status", root + "/two", "--json"]).object()["removed"] == nil)
        try await expectSyncBothWays(cli, root + "/one", root + "/two", after: "removed")
        try cli.ok(["fleet", "down", file.path, "--root", root])
    }

    /// Each device adds a synchronizable item named after the event; each then holds the other's.
    private func expectSyncBothWays(
        _ cli: CLI, _ one: String, _ two: String, after event: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        for (dir, value) in [(one, "1"), (two, "2")] {
            try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "\(event)-\(value)", "--value", value, "--sync"])
        }
        #expect(try await arrival(cli, one, "\(event)-2") == "2", "after \(event)", sourceLocation: sourceLocation)
        #expect(try await arrival(cli, two, "\(event)-1") == "1", "after \(event)", sourceLocation: sourceLocation)
    }

    /// The secret of `account` once the node at `dir` holds it (nodes sync every second on their
    /// own), or "" if it has not come in a minute, however loaded the machine.
    private func arrival(_ cli: CLI, _ dir: String, _ account: String) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let found = try cli.run(["item", "get", dir, "--app", "com.example.mail", "--account", account, "--sync", "yes"])
            if found.status == 0 { return found.text }
            try await Task.sleep(for: .milliseconds(100))
        }
        return ""
    }

    @Test("every member stopped and started, or killed with SIGKILL, starts before first unlock, answers, and syncs both ways once unlocked")
    func restart() async throws {
        let cli = try CLI()
        let (_, line) = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json"])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
        let phone = try cli.poweredDevice("phone")
        let tablet = try cli.poweredDevice("tablet")
        try cli.ok(["circle", "create", phone, "--relay", relay])
        try cli.ok(["circle", "join", tablet, "--sponsor", phone])

        for dir in [phone, tablet] {
            try cli.ok(["node", "stop", dir])
            try cli.ok(["node", "start", dir])
            #expect(try cli.status(dir)["lockState"] as? String == "bfu")
            let sealed = try cli.ok(["circle", "status", dir, "--json"]).object()
            #expect(sealed["sealedUntilUnlock"] as? Bool == true && (sealed["members"] as? [Any])?.count == 2)
            #expect(try cli.ok(["circle", "status", dir]).text.contains("sealed until the device is first unlocked"))
            try cli.ok(["sync", "status", dir])
        }
        for dir in [phone, tablet] { try cli.ok(["device", "unlock", dir, "--passcode", "123456"]) }
        try cli.ok(["item", "add", phone, "--app", "com.example.mail", "--account", "from-phone", "--value", "p", "--sync"])
        try cli.ok(["item", "add", tablet, "--app", "com.example.mail", "--account", "from-tablet", "--value", "t", "--sync"])
        #expect(try await arrival(cli, tablet, "from-phone") == "p")
        #expect(try await arrival(cli, phone, "from-tablet") == "t")

        let pid = try #require(try cli.ok(["node", "status", tablet, "--json"]).object()["pid"] as? Int)
        ProcessControl.send(.kill, to: Int32(pid))
        while ProcessControl.isAlive(Int32(pid)) { try await Task.sleep(for: .milliseconds(10)) }
        try cli.ok(["node", "start", tablet])
        try cli.ok(["device", "unlock", tablet, "--passcode", "123456"])
        try cli.ok(["item", "add", tablet, "--app", "com.example.mail", "--account", "after-kill", "--value", "k", "--sync"])
        try cli.ok(["item", "add", phone, "--app", "com.example.mail", "--account", "to-killed", "--value", "q", "--sync"])
        #expect(try await arrival(cli, phone, "after-kill") == "k")
        #expect(try await arrival(cli, tablet, "to-killed") == "q")

        // Made local on the phone: gone from the tablet, kept on the phone.
        try cli.ok(["item", "update", phone, "--app", "com.example.mail", "--account", "from-phone", "--sync", "yes", "--set-sync", "no"])
        try cli.ok(["sync", "now", phone])
        try cli.ok(["sync", "now", tablet])
        let gone = try cli.run(["item", "get", tablet, "--app", "com.example.mail", "--account", "from-phone", "--sync", "any"])
        #expect(gone.status == 3 && gone.stderr.contains("errSecItemNotFound"), "\(gone.stderr)")
        #expect(try cli.ok(["item", "get", phone, "--app", "com.example.mail", "--account", "from-phone"]).text == "p")
        let badSwitch = try cli.run(["item", "update", phone, "--app", "com.example.mail", "--account", "from-phone", "--set-sync", "maybe"])
        #expect(badSwitch.status == 64 && badSwitch.stderr.contains("yes|no"), "\(badSwitch.stderr)")
    }

    @Test("a join the joiner would refuse changes nothing on the sponsor; a removed device leaves and joins again; a member cannot remove itself")
    func joinRefusalsAndLeave() throws {
        let cli = try CLI()
        let (relayProcess, line) = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json"])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
        let a = try cli.poweredDevice("a")
        let b = try cli.poweredDevice("b")
        let c = try cli.poweredDevice("c")
        try cli.ok(["circle", "create", a, "--relay", relay])
        try cli.ok(["circle", "join", b, "--sponsor", a])
        // The key exactly as `circle status` prints it, ellipsis and all, names the member.
        let printed = try #require(try cli.ok(["circle", "status", a]).text.split(separator: "\n").first { $0.hasPrefix("  b ") })
        let key = try #require(printed.split(separator: " ").last.map(String.init))
        #expect(key.hasSuffix("…") && key.count == 17, "\(printed)")
        try cli.ok(["circle", "remove", a, "--peer", key])
        func members() throws -> [String] {
            (try cli.ok(["circle", "status", a, "--json"]).object()["members"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        }
        #expect(try members() == ["a"])

        let again = try cli.run(["circle", "join", b, "--sponsor", a])
        #expect(again.status == 64 && again.stderr.contains("already in circle") && again.stderr.contains("circle leave"), "\(again.stderr)")
        #expect(try members() == ["a"])
        let removed = try cli.run(["sync", "now", b])
        #expect(removed.status == 1 && removed.stderr.contains("`circle leave` forgets the circle"), "\(removed.stderr)")
        #expect(try cli.ok(["circle", "status", b, "--json"]).object()["removed"] as? Bool == true)
        let own = try cli.run(["circle", "remove", a, "--peer", "a"])
        #expect(own.status == 64 && own.stderr.contains("circle leave"), "\(own.stderr)")
        #expect(try members() == ["a"])
        let emptyName = try cli.run(["circle", "join", c, "--sponsor", a, "--name", ""])
        #expect(emptyName.status == 64 && emptyName.stderr.contains("name cannot be empty"), "\(emptyName.stderr)")
        try cli.ok(["node", "reboot", c])
        let sealed = try cli.run(["circle", "join", c, "--sponsor", a])
        #expect(sealed.status == 3 && sealed.stderr.contains("has not been unlocked since it was powered on"), "\(sealed.stderr)")
        #expect(try members() == ["a"])

        try cli.ok(["circle", "leave", b])
        #expect(try cli.ok(["circle", "status", b]).text.contains("in no circle"))
        #expect(!FileManager.default.fileExists(atPath: b + "/sync.json"))
        try cli.ok(["circle", "join", b, "--sponsor", a])
        #expect(try members() == ["a", "b"])
        try cli.ok(["circle", "leave", b, "--json"])
        try cli.ok(["sync", "now", a])
        #expect(try members() == ["a"], "a member that leaves is removed for the others")
        #expect(try cli.ok(["circle", "status", a, "--json"]).object()["epoch"] as? Int == 3, "with new keys it does not hold")
        // Leaving again has nothing to do, and says so.
        let notIn = try cli.run(["circle", "leave", b])
        #expect(notIn.status == 0 && notIn.text.contains("nothing to do") && notIn.text.contains("in no circle"), "\(notIn.text)")

        // With the relay down, leave changes nothing and points to --force, which forgets anyway.
        try cli.ok(["circle", "join", b, "--sponsor", a])
        relayProcess.terminate()
        relayProcess.waitUntilExit()
        let unreachable = try cli.run(["circle", "leave", b])
        #expect(
            unreachable.status == 6 && unreachable.stderr.contains("nothing was changed") && unreachable.stderr.contains("--force"),
            "\(unreachable.stderr)")
        #expect(FileManager.default.fileExists(atPath: b + "/sync.json"))
        try cli.ok(["circle", "leave", b, "--force"])
        #expect(try cli.ok(["circle", "status", b]).text.contains("in no circle"))
    }
}
