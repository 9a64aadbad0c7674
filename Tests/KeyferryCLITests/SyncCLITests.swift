import Foundation
import Testing

@Suite("keyferry circle and sync")
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
        try cli.ok(["app", "install", laptop, "--bundle", "com.other.reader", "--team", "ZZZZZ99999"])
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
        let phone = try cli.poweredDevice("phone"), tablet = try cli.poweredDevice("tablet")
        let noCircle = try cli.run(["circle", "join", tablet, "--sponsor", phone])
        #expect(noCircle.status == 1 && noCircle.stderr.contains("in no circle"), "\(noCircle.stderr)")
        let badRelay = try cli.run(["circle", "create", phone, "--relay", "not a url"])
        #expect(badRelay.status == 1 && badRelay.stderr.contains("http://HOST:PORT"), "\(badRelay.stderr)")
        let syncAlone = try cli.run(["sync", "now", phone])
        #expect(syncAlone.status == 1 && syncAlone.stderr.contains("in no circle"), "\(syncAlone.stderr)")
        #expect(try cli.ok(["circle", "status", phone]).text.contains("in no circle"))
        #expect(!FileManager.default.fileExists(atPath: phone + "/sync.json"))
        let stopped = cli.path("stopped")
        try cli.ok(["device", "init", stopped])
        let notRunning = try cli.run(["circle", "status", stopped])
        #expect(notRunning.status == 1 && notRunning.stderr.contains("node start"), "\(notRunning.stderr)")
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
        let up = try cli.ok(["fleet", "up", file.path, "--root", root, "--json"]).json() as? [[String: Any]] ?? []
        let circles = Set(up.compactMap { $0["circle"] as? String })
        #expect(up.count == 2 && circles.count == 1)
        try cli.ok(["item", "add", root + "/one", "--app", "com.example.mail", "--account", "otp", "--value", "123456", "--sync"])
        // No `sync now`: the nodes sync every second on their own.
        var arrived = ""
        for _ in 0..<50 where arrived.isEmpty {
            try await Task.sleep(for: .milliseconds(100))
            arrived = try cli.run(["item", "get", root + "/two", "--app", "com.example.mail", "--account", "otp", "--sync", "yes"]).text
        }
        #expect(arrived == "123456")
        let again = try cli.ok(["fleet", "up", file.path, "--root", root]).text
        #expect(again.contains("every device is in circle \(circles.first ?? "")"))
        try cli.ok(["fleet", "down", file.path, "--root", root])
        #expect(!FileManager.default.fileExists(atPath: root + "/relay/relay.json"), "the relay stopped")
        let statusAfter = try cli.run(["circle", "status", root + "/two"])
        #expect(statusAfter.status == 1, "the node is down")
    }
}
