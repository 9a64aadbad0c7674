import Foundation
import KeychainTesting
import KeyferrySystem
import Testing

/// `keyferry fleet up|status|down` against fleets in a temporary root (the test's own, so
/// that `CLI` stops their nodes however the test ends).
@Suite("keyferry fleet", .blocking)
struct FleetCLITests {
    static let fleet = """
        fleet: pair
        apps:
          com.example.mail: { team: ABCDE12345, groups: [ABCDE12345.shared] }
          com.example.widget: { team: ABCDE12345, groups: [ABCDE12345.shared] }
        devices:
          phone:
            name: Test iPhone
            passcode: "123456"
            biometry: true
            apps: [com.example.mail, com.example.widget]
          tablet:
            apps: [com.example.mail]
        """

    func write(_ cli: CLI, _ text: String, as name: String = "pair.yaml") throws -> String {
        let file = cli.root.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    @Test("up creates, starts, unlocks and installs; status shows each node; up again changes nothing; down stops")
    func lifecycle() throws {
        let cli = try CLI()
        let file = try write(cli, Self.fleet)
        let root = ["--root", cli.root.path]

        let arrivals = try #require(try cli.ok(["fleet", "up", file, "--json"] + root).object()["members"] as? [[String: Any]])
        #expect(arrivals.map { $0["member"] as? String } == ["phone", "tablet"])
        let phone = arrivals[0]
        #expect(phone["created"] as? Bool == true && phone["started"] as? Bool == true && phone["unlocked"] as? Bool == true)
        #expect(phone["installed"] as? [String] == ["com.example.mail", "com.example.widget"])
        // A device without a passcode comes up unlocked: nothing to unlock.
        #expect(arrivals[1]["unlocked"] as? Bool == false)
        let phoneStatus = try cli.status(cli.path("phone"))
        #expect(phoneStatus["lockState"] as? String == "unlocked")
        #expect(phoneStatus["biometryEnrolled"] as? Bool == true)
        #expect(phoneStatus["name"] as? String == "Test iPhone")

        // The apps share their group on the phone: one writes, the other reads.
        try cli.ok(["item", "add", cli.path("phone"), "--app", "com.example.mail", "--account", "a", "--group", "ABCDE12345.shared", "--value", "v"])
        #expect(try cli.ok(["item", "get", cli.path("phone"), "--app", "com.example.widget", "--account", "a"]).text == "v")

        let lines = try cli.ok(["fleet", "status", file] + root).text.split(separator: "\n")
        #expect(lines.count == 3 && lines[0] == "pair fleet in \(cli.root.path)")
        #expect(lines[1].hasPrefix("  phone ") && lines[1].contains("on") && lines[1].contains("unlocked") && lines[1].contains("1 item"))
        #expect(lines[2].hasPrefix("  tablet") && lines[2].contains("0 items"))

        let again = try cli.ok(["fleet", "up", file] + root).text
        #expect(again.components(separatedBy: "already up").count == 3, "\(again)")

        let down = try #require(try cli.ok(["fleet", "down", file, "--json"] + root).object()["members"] as? [[String: String]])
        #expect(down.map { $0["result"] } == ["stopped", "stopped"])
        let statuses = try #require(try cli.ok(["fleet", "status", file, "--json"] + root).object()["members"] as? [[String: Any]])
        #expect(statuses.compactMap { ($0["device"] as? [String: Any])?["poweredOn"] as? Bool } == [false, false])
        // A teardown that finds nothing running says so, and succeeds: there is nothing to do.
        let nothing = try cli.run(["fleet", "down", file] + root)
        #expect(nothing.status == 0 && nothing.text.contains("nothing to stop: no node or relay of the pair fleet runs"), "\(nothing.text)")
    }

    @Test("a malformed file names file, line and field, and creates and starts nothing")
    func malformed() throws {
        let cli = try CLI()
        let file = try write(cli, Self.fleet.replacingOccurrences(of: "    biometry: true", with: "    biometry: true\n    passcod: 1"), as: "bad.yaml")
        let root = cli.root.appendingPathComponent("fleet")
        let result = try cli.run(["fleet", "up", file, "--root", root.path])
        #expect(result.status == 64)
        #expect(result.stderr.contains("bad.yaml:10:5: devices.phone.passcod: unknown field"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: root.path))

        let missing = try cli.run(["fleet", "status", cli.root.appendingPathComponent("none.yaml").path])
        #expect(missing.status == 5)
        #expect(missing.stderr.contains("none.yaml: cannot read the fleet file: there is no such file"))
        let directory = try cli.run(["fleet", "up", cli.root.path])
        #expect(directory.status == 64 && directory.stderr.contains("cannot read the fleet file: it is a directory"))
    }

    @Test("when one device fails, up uninstalls what it installed, stops what it started and removes what it created")
    func rollback() throws {
        let cli = try CLI()
        let file = try write(
            cli,
            Self.fleet + """

                  laptop:
                    passcode: "4321"
                """)
        // The phone exists with a passcode the fleet file does not know; the tablet exists and runs.
        try cli.ok(["device", "init", cli.path("phone"), "--passcode", "999999"])
        try cli.ok(["device", "init", cli.path("tablet")])
        try cli.ok(["node", "start", cli.path("tablet")])

        let result = try cli.run(["fleet", "up", file, "--root", cli.root.path])
        #expect(result.status == 4)
        #expect(result.stderr.contains("phone: errSecAuthFailed (-25293)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.path("laptop")))
        #expect(try cli.status(cli.path("phone"))["poweredOn"] as? Bool == false)
        #expect(try cli.status(cli.path("tablet"))["poweredOn"] as? Bool == true)
        #expect((try cli.ok(["app", "list", cli.path("tablet"), "--json"]).json() as? [Any])?.isEmpty == true)
        // What was undone is said, member by member.
        #expect(
            result.stderr.contains("rolled back: ") && result.stderr.contains("phone (node stopped)")
                && result.stderr.contains("tablet (com.example.mail uninstalled)") && result.stderr.contains("laptop (node stopped, device removed)"),
            "\(result.stderr)")
        try cli.ok(["node", "stop", cli.path("tablet")])

        // A directory in a member's place that is not a device: refused before anything starts.
        try FileManager.default.removeItem(atPath: cli.path("phone"))
        try FileManager.default.createDirectory(atPath: cli.path("phone"), withIntermediateDirectories: false)
        let notDevice = try cli.run(["fleet", "up", file, "--root", cli.root.path])
        #expect(notDevice.status == 5)
        #expect(notDevice.stderr.contains("phone: ") && notDevice.stderr.contains("is not a Keyferry device"))
        #expect(!FileManager.default.fileExists(atPath: cli.path("laptop")))
        #expect(try cli.status(cli.path("tablet"))["poweredOn"] as? Bool == false)
    }
}

extension FleetCLITests {
    @Test("up, status and down find a fleet brought up with --root; two roots make them ask which")
    func rememberedRoot() throws {
        let cli = try CLI()
        let file = try write(cli, Self.fleet)
        let first = cli.root.appendingPathComponent("ci-1").path
        try cli.ok(["fleet", "up", file, "--root", first])
        let status = try cli.ok(["fleet", "status", file]).text
        #expect(status.hasPrefix("pair fleet in \(first)\n") && status.contains("unlocked"), "\(status)")
        let down = try cli.ok(["fleet", "down", file, "--json"]).object()
        #expect((down["members"] as? [[String: String]])?.map { $0["result"] } == ["stopped", "stopped"])
        #expect(try cli.status(first + "/phone")["poweredOn"] as? Bool == false)
        // Up again without --root: where it was, not a second fleet at the default root.
        #expect(try cli.ok(["fleet", "up", file]).text.hasPrefix("pair fleet in \(first)\n"))
        try cli.ok(["fleet", "down", file])

        let second = cli.root.appendingPathComponent("ci-2").path
        try cli.ok(["fleet", "up", file, "--root", second])
        let ambiguous = try cli.run(["fleet", "down", file])
        #expect(ambiguous.status == 64 && ambiguous.stderr.contains(first) && ambiguous.stderr.contains(second), "\(ambiguous.stderr)")
        #expect(try cli.status(second + "/phone")["poweredOn"] as? Bool == true, "an ambiguous down stops nothing")
        try cli.ok(["fleet", "down", file, "--root", second])

        // A fleet never brought up: down says where it looked, and fails as not found.
        let other = try write(cli, Self.fleet.replacingOccurrences(of: "fleet: pair", with: "fleet: other"), as: "other.yaml")
        let nothing = try cli.run(["fleet", "down", other])
        #expect(nothing.status == 5 && nothing.stderr.contains("no device of the other fleet exists") && nothing.stderr.contains("--root"))
    }

    @Test("relay: auto picks a free port, printed, and the circle keeps it across down and up")
    func relayAuto() throws {
        let cli = try CLI()
        let file = try write(
            cli,
            """
            fleet: synced
            sync: { relay: auto }
            apps:
              com.example.mail: { team: ABCDE12345 }
            devices:
              one: { passcode: "1111", apps: [com.example.mail] }
              two: { apps: [com.example.mail] }
            """, as: "synced.yaml")
        let root = ["--root", cli.root.appendingPathComponent("synced").path]
        let up = try cli.ok(["fleet", "up", file] + root).text
        let url = try #require(up.split(separator: "\n").last.flatMap { $0.split(separator: " ").last }.map(String.init), "\(up)")
        #expect(url.hasPrefix("http://127.0.0.1:") && !url.hasSuffix(":0"), "\(up)")
        try cli.ok(["fleet", "down", file] + root)
        let again = try cli.ok(["fleet", "up", file] + root).text
        #expect(again.hasSuffix("relay at \(url)\n"), "the members know the relay by its first address: \(again)")
        // Sync works through it after the restart.
        let one = cli.root.appendingPathComponent("synced/one").path
        let two = cli.root.appendingPathComponent("synced/two").path
        try cli.ok(["item", "add", one, "--app", "com.example.mail", "--account", "a", "--value", "v", "--sync"])
        try cli.ok(["sync", "now", one])
        try cli.ok(["sync", "now", two])
        #expect(try cli.ok(["item", "get", two, "--app", "com.example.mail", "--account", "a", "--sync", "yes"]).text == "v")
        let moved = try cli.run(["fleet", "up", file, "--relay-port", "1"] + root)
        #expect(moved.status == 64 && moved.stderr.contains("which its members know"), "\(moved.stderr)")
        try cli.ok(["fleet", "down", file] + root)
    }

    @Test("down stops the other members and the relay when one member's node does not answer, and names it")
    func downPastAHungMember() throws {
        let cli = try CLI()
        let file = try write(
            cli,
            """
            fleet: hung
            sync: { relay: auto }
            apps:
              com.example.mail: { team: ABCDE12345 }
            devices:
              one: { apps: [com.example.mail] }
              two: { apps: [com.example.mail] }
            """, as: "hung.yaml")
        let root = cli.root.appendingPathComponent("hung")
        try cli.ok(["fleet", "up", file, "--root", root.path])
        let one = root.appendingPathComponent("one").path
        let pid = Int32(try #require(try cli.ok(["node", "status", one, "--json"]).object()["pid"] as? Int))
        let announcement = try Data(contentsOf: root.appendingPathComponent("relay/relay.json"))
        let announced = try #require(try JSONSerialization.jsonObject(with: announcement) as? [String: Any])
        let relay = Int32(try #require(announced["pid"] as? Int))
        // Frozen with its control socket gone: alive and holding its lock, answering nothing
        // (as a node is while it traps and writes its backtrace).
        #expect(ProcessControl.send(.stop, to: pid))
        defer {
            _ = ProcessControl.send(.kill, to: pid)
            _ = ProcessControl.send(.resume, to: pid)
        }
        try FileManager.default.removeItem(atPath: one + "/node.sock")
        let down = try cli.run(["fleet", "down", file, "--root", root.path])
        #expect(down.status != 0 && down.stderr.contains("one:"), "\(down.stderr)")
        #expect(try cli.ok(["node", "status", root.appendingPathComponent("two").path, "--json"]).object()["pid"] == nil, "two is stopped")
        // It lets go of its lock, and so of its data, just before it exits.
        let deadline = Date().addingTimeInterval(30)
        while ProcessControl.isAlive(relay), Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(!ProcessControl.isAlive(relay), "the relay is stopped")
    }

    @Test("Ctrl-C during up rolls back what it did and says so")
    func interruptedUp() throws {
        let cli = try CLI()
        let devices = (1...4).map { "  d\($0): { passcode: \"1234\", apps: [com.example.mail] }" }.joined(separator: "\n")
        let file = try write(cli, "fleet: big\napps:\n  com.example.mail: { team: ABCDE12345 }\ndevices:\n\(devices)\n", as: "big.yaml")
        let root = cli.root.appendingPathComponent("big")
        let (process, firstLine) = try cli.start(["fleet", "up", file, "--root", root.path])
        // Should up finish before the signal lands, its nodes still go when the test does.
        defer { _ = try? cli.run(["fleet", "down", file, "--root", root.path]) }
        #expect(firstLine.hasPrefix("big fleet in"))
        ProcessControl.send(.interrupt, to: process.processIdentifier)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        for name in ["d1", "d2", "d3", "d4"] {
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent(name).path), "\(name) was created by the interrupted up")
        }
        // No node survives, not even one that was still starting when the signal came: each
        // such node goes on its own once it finds its fleet gone (a minute at most, loaded).
        func survivors() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { pid in
                let command = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
                return String(decoding: command, as: UTF8.self).contains(root.path)
            }
        }
        let deadline = Date().addingTimeInterval(60)
        while !survivors().isEmpty, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(survivors().isEmpty, "nodes of the interrupted fleet still run: \(survivors())")
    }
}

@Suite("keyferry demo", .blocking)
struct DemoCLITests {
    @Test("the README's demo runs the family fleet through its story, syncing included, and leaves no node running")
    func demo() throws {
        let cli = try CLI()
        let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/family.yaml")
        let root = cli.root.appendingPathComponent("demo")
        let lines = try cli.ok(["demo", "--fleet", peers.path, "--root", root.path]).text.split(separator: "\n").map(String.init)
        func outcome(_ label: String) -> String? {
            lines.first { $0.contains(label) }?.split(separator: " ").last.map(String.init)
        }
        #expect(outcome("the widget reads session-token") == "ok")
        #expect(outcome("the bank app") == "(-25300)")
        #expect(outcome("(phantom mismatch)") == "(-25299)")
        #expect(outcome("at once, read session-token") == "ok")
        #expect(lines.contains { $0.contains("s later, read session-token") && $0.hasSuffix("(-25308)") })
        #expect(outcome("read legacy-pin (always)") == "ok")
        #expect(lines.contains { $0.contains("held: a one-hour Security Delay starts") })
        #expect(outcome("read vault-key during the delay") == "ok")
        #expect(lines.contains { $0.contains("the widget, launched now, reads signedInUser from group.com.example.mail: nothing") })
        #expect(outcome("keychain secrets found in plaintext") == "0")
        // The new iPhones: migratable items back from the encrypted backup, none from the unencrypted
        // one, and back from the phone's iOS backup (Finder's format), its ThisDeviceOnly items sealed.
        #expect(lines.contains { $0.contains("dropped  push-key") && $0.contains("device-bound") })
        #expect(lines.contains { $0.contains("restored session-token") })
        #expect(lines.filter { $0.contains("restored onto a new iPhone") }.map { $0.contains(": 0 of") } == [false, true, false])
        #expect(lines.contains { $0.contains("dropped  (attributes sealed)") && $0.contains("sealed to the iPhone that made the backup") })
        // The circle: the synchronizable item reaches the iPad and the MacBook; the rest stays on the phone.
        #expect(lines.filter { $0.contains("mail reads the imap password") }.map { $0.hasSuffix("ok") } == [true, true])
        #expect(lines.filter { $0.contains("mail reads session-token (not synchronizable)") }.map { $0.hasSuffix("(-25300)") } == [true, true])
        #expect(lines.contains { $0.contains("keeps wifi-token to itself") })
        // The MacBook: iOS code's add lands in the file-based keychain, which a screen lock leaves open.
        #expect(lines.contains { $0.contains("without kSecUseDataProtectionKeychain: it lands in the file-based keychain") })
        #expect(outcome("read mac-token with kSecUseDataProtectionKeychain") == "(-25300)")
        #expect(outcome("read mac-token from the file-based keychain") == "ok")
        #expect(outcome("read mac-token from the data protection keychain") == "(-25308)")
        #expect(lines.contains { $0.hasSuffix("deletes mac-token: 2 items, one from each keychain") })
        #expect(!lines.contains { $0.contains("keyferry.sync") }, "the device's own sync keys are never the user's items")
        #expect(lines.filter { $0.hasSuffix("stopped") }.count == 3)
        #expect(lines.contains { $0.contains("The devices stay in \(root.path);") })
        let overview = try cli.ok(["fleet", "status", peers.path, "--root", root.path, "--json"]).object()
        let statuses = try #require(overview["members"] as? [[String: Any]])
        #expect(statuses.count == 3)
        #expect(statuses.allSatisfy { ($0["device"] as? [String: Any])?["poweredOn"] as? Bool == false })
    }

    @Test("without --root the demo's devices are its own, removed when it ends, and it says nothing of keeping them")
    func demoInTemporaryDirectory() throws {
        let cli = try CLI()
        let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/family.yaml")
        let text = try cli.ok(["demo", "--fleet", peers.path]).text
        #expect(text.contains("The fleet goes down"))
        #expect(!text.contains("stay in"))
    }

    @Test("Ctrl-C in the demo: exit 130 through the one exit path, its fleet brought down")
    func interrupted() throws {
        let cli = try CLI()
        let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers/family.yaml")
        let root = cli.root.appendingPathComponent("demo")
        let (process, firstLine) = try cli.start(["demo", "--fleet", peers.path, "--root", root.path])
        defer { _ = try? cli.run(["fleet", "down", peers.path, "--root", root.path]) }
        #expect(firstLine.hasPrefix("== "), "\(firstLine)")
        ProcessControl.send(.interrupt, to: process.processIdentifier)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130 && process.terminationReason == .exit)
        let overview = try cli.ok(["fleet", "status", peers.path, "--root", root.path, "--json"]).object()
        let statuses = try #require(overview["members"] as? [[String: Any]])
        #expect(statuses.allSatisfy { ($0["device"] as? [String: Any])?["poweredOn"] as? Bool != true }, "\(statuses)")
    }
}

@Suite("the README's quick start", .blocking)
struct QuickStartTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the README opens with its quick start: two commands, the demo and the test suite CI runs")
    func quickStart() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "# Keyferry")
        let quickStart = try #require(lines.firstIndex(of: "## Quick start"))
        #expect(!lines[..<quickStart].contains { $0.hasPrefix("## ") || $0.hasPrefix("|") }, "nothing but the title and its line comes before the quick start")
        let open = try #require(lines[quickStart...].firstIndex(of: "```sh"))
        let close = try #require(lines[(open + 1)...].firstIndex(of: "```"))
        let commands = lines[(open + 1)..<close].map { $0.split(separator: "#")[0].trimmingCharacters(in: .whitespaces) }
        #expect(commands == ["./scripts/demo", "./scripts/test"])
        for command in commands {
            #expect(
                FileManager.default.isExecutableFile(atPath: Self.repository.appendingPathComponent(command).path), "\(command) is a script of the repository")
        }
        let ci = try String(contentsOf: Self.repository.appendingPathComponent(".ci/run"), encoding: .utf8)
        #expect(ci.split(separator: "\n").last == "./scripts/test", ".ci/run runs the quick start's test command")
    }
}
