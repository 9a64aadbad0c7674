import Foundation
import KeychainTesting
import Testing

@Suite("keyferry circle join across machines", .blocking)
struct JoinCLITests {
    /// A device as on a machine of its own: its own HOME and temporary directory, and nothing
    /// of the others' paths. Only the relay's address and the CA's certificate are shared.
    private struct Machine {
        let dir: String
        let environment: [String: String]

        init(_ name: String, _ cli: CLI, authority: URL, passcode: String) throws {
            let home = cli.root.appendingPathComponent("\(name)-home")
            let tmp = cli.root.appendingPathComponent("\(name)-tmp")
            for directory in [home, tmp] { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
            environment = ["HOME": home.path, "TMPDIR": tmp.path, "KEYFERRY_RELAY_CA": authority.path]
            dir = cli.path(name)
            try cli.ok(["device", "init", dir, "--name", name, "--passcode", passcode], environment: environment)
            try cli.ok(["node", "start", dir], environment: environment)
            try cli.ok(["device", "unlock", dir, "--passcode", passcode], environment: environment)
            try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345"], environment: environment)
        }

        @discardableResult
        func ok(_ cli: CLI, _ arguments: [String]) throws -> CLI.Result { try cli.ok(arguments, environment: environment) }
        func run(_ cli: CLI, _ arguments: [String]) throws -> CLI.Result { try cli.run(arguments, environment: environment) }
    }

    /// A relay serving https with a test CA's certificate, and its URL.
    private static func relayOverTLS(_ cli: CLI) throws -> (TestAuthority, String) {
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"))
        let (_, line) = try cli.start([
            "relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        return (pki, try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String)
    }

    @Test("a device on another machine asks through a TLS relay, a member approves its code, and both sync both ways; bad codes are refused by name")
    func askAndApprove() throws {
        let cli = try CLI()
        let (pki, relay) = try Self.relayOverTLS(cli)
        let phone = try Machine("phone", cli, authority: pki.authority, passcode: "111111")
        let laptop = try Machine("laptop", cli, authority: pki.authority, passcode: "222222")
        let circle = try #require(try phone.ok(cli, ["circle", "create", phone.dir, "--relay", relay, "--json"]).object()["circle"] as? String)

        let (joining, output) = try cli.start(
            ["circle", "join", laptop.dir, "--circle", circle, "--relay", relay, "--json"], whenItSays: "code ", environment: laptop.environment)
        let status = try laptop.ok(cli, ["circle", "status", laptop.dir, "--json"]).object()
        #expect((status["members"] as? [Any])?.isEmpty == true, "asking admits nothing: \(status)")
        let pending = try #require(try phone.ok(cli, ["circle", "requests", phone.dir, "--json"]).object()["requests"] as? [[String: Any]])
        #expect(pending.count == 1 && pending.first?["name"] as? String == "laptop")
        let code = try #require(pending.first?["code"] as? String)

        let wrong = try phone.run(cli, ["circle", "approve", phone.dir, "000 000", "--json"])
        let wrongCode = try wrong.object()["code"] as? String
        #expect(wrong.status == 5 && wrongCode == "noSuchRequest", "\(wrong.stderr)")
        let garbled = try phone.run(cli, ["circle", "approve", phone.dir, "12x456"])
        #expect(garbled.status == 64 && garbled.stderr.contains("not a join code"), "\(garbled.stderr)")

        let approved = try phone.ok(cli, ["circle", "approve", phone.dir, code.replacingOccurrences(of: " ", with: ""), "--json"]).object()
        #expect(approved["name"] as? String == "laptop")
        joining.waitUntilExit()
        #expect(joining.terminationStatus == 0)
        let joined = try #require(try JSONSerialization.jsonObject(with: output.readDataToEndOfFile()) as? [String: Any])
        #expect(joined["circle"] as? String == circle && (joined["members"] as? [Any])?.count == 2, "\(joined)")

        try phone.ok(cli, ["item", "add", phone.dir, "--app", "com.example.mail", "--account", "from-phone", "--value", "p", "--sync"])
        try laptop.ok(cli, ["item", "add", laptop.dir, "--app", "com.example.mail", "--account", "from-laptop", "--value", "l", "--sync"])
        for machine in [phone, laptop, phone] { try machine.ok(cli, ["sync", "now", machine.dir]) }
        for (machine, account, value) in [(phone, "from-laptop", "l"), (laptop, "from-phone", "p")] {
            let got = try machine.ok(cli, ["item", "get", machine.dir, "--app", "com.example.mail", "--account", account, "--sync", "yes"])
            #expect(got.text.trimmingCharacters(in: .whitespacesAndNewlines) == value)
        }
    }

    @Test("a voucher file admits its device once: a file that is no voucher, one for another device, and one used again are refused by name")
    func voucherFile() throws {
        let cli = try CLI()
        let (pki, relay) = try Self.relayOverTLS(cli)
        let phone = try Machine("phone", cli, authority: pki.authority, passcode: "111111")
        let laptop = try Machine("laptop", cli, authority: pki.authority, passcode: "222222")
        let tablet = try Machine("tablet", cli, authority: pki.authority, passcode: "333333")
        try phone.ok(cli, ["circle", "create", phone.dir, "--relay", relay])

        let identity = cli.path("laptop-identity.json")
        let voucher = cli.path("laptop.voucher")
        let said = try laptop.ok(cli, ["circle", "identity", laptop.dir, "--out", identity]).text
        let vouched = try phone.ok(cli, ["circle", "vouch", phone.dir, "--for", identity, "--out", voucher]).text
        let code = try #require(said.firstMatch(of: /code (\d{3} \d{3})/)?.output.1)
        #expect(vouched.contains("code \(code)"), "both sides print the same code: \(said) / \(vouched)")
        let again = try phone.run(cli, ["circle", "vouch", phone.dir, "--for", identity, "--out", voucher])
        #expect(again.status == 64 && again.stderr.contains("exists already"))

        let notAVoucher = try laptop.run(cli, ["circle", "join", laptop.dir, "--voucher", identity])
        #expect(notAVoucher.status == 64 && notAVoucher.stderr.contains("is not a voucher"), "\(notAVoucher.stderr)")
        let forAnother = try tablet.run(cli, ["circle", "join", tablet.dir, "--voucher", voucher, "--json"])
        let forAnotherCode = try forAnother.object()["code"] as? String
        #expect(forAnother.status == 64 && forAnotherCode == "notVouched", "\(forAnother.stderr)")
        #expect((try tablet.ok(cli, ["circle", "status", tablet.dir, "--json"]).object()["members"] as? [Any])?.isEmpty == true)

        let joined = try laptop.ok(cli, ["circle", "join", laptop.dir, "--voucher", voucher, "--json"]).object()
        #expect((joined["members"] as? [Any])?.count == 2)
        try laptop.ok(cli, ["circle", "leave", laptop.dir])
        let replayed = try laptop.run(cli, ["circle", "join", laptop.dir, "--voucher", voucher, "--json"])
        let replayedCode = try replayed.object()["code"] as? String
        #expect(replayed.status == 64 && replayedCode == "staleVoucher", "\(replayed.stderr)")
    }

    @Test(
        "a fleet on another machine joins a circle made elsewhere: each device asks through the one TLS relay, shows its code, and up waits for the approvals")
    func fleetOnAnotherMachine() throws {
        let cli = try CLI()
        let (pki, relay) = try Self.relayOverTLS(cli)
        func machine(_ name: String) throws -> [String: String] {
            let home = cli.root.appendingPathComponent("\(name)-home")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            return ["HOME": home.path, "TMPDIR": home.path, "KEYFERRY_RELAY_CA": pki.authority.path]
        }
        let (first, second) = (try machine("first"), try machine("second"))
        let apps = "apps:\n  com.example.mail: { team: ABCDE12345 }\n"
        let office = cli.path("office.yaml")
        try Data("fleet: office\nsync: { relay: \"\(relay)\" }\n\(apps)devices:\n  alice: { passcode: \"1111\", apps: [com.example.mail] }\n".utf8)
            .write(to: URL(fileURLWithPath: office))
        let officeRoot = ["--root", cli.path("office")]
        defer { _ = try? cli.run(["fleet", "down", office] + officeRoot, environment: first) }
        let formed = try cli.ok(["fleet", "up", office, "--json"] + officeRoot, environment: first).object()
        let circle = try #require(formed["circle"] as? String)

        let lab = cli.path("lab.yaml")
        try Data(
            """
            fleet: lab
            sync: { relay: "\(relay)", circle: \(circle) }
            \(apps)devices:
              bob: { passcode: "2222", apps: [com.example.mail] }
              carol: { apps: [com.example.mail] }

            """.utf8
        ).write(to: URL(fileURLWithPath: lab))
        let labRoot = ["--root", cli.path("lab")]
        defer { _ = try? cli.run(["fleet", "down", lab] + labRoot, environment: second) }
        let (up, output) = try cli.start(["fleet", "up", lab, "--json"] + labRoot, whenItSays: "asks to join", environment: second)
        let alice = cli.path("office/alice")
        var pending: [[String: Any]] = []
        while pending.count < 2 && up.isRunning {
            pending = try cli.ok(["circle", "requests", alice, "--json"], environment: first).object()["requests"] as? [[String: Any]] ?? []
        }
        #expect(Set(pending.compactMap { $0["name"] as? String }) == ["bob", "carol"])
        for request in pending { try cli.ok(["circle", "approve", alice, try #require(request["code"] as? String)], environment: first) }
        up.waitUntilExit()
        #expect(up.terminationStatus == 0)
        let arrivals = try #require(try JSONSerialization.jsonObject(with: output.readDataToEndOfFile()) as? [String: Any])
        #expect(arrivals["circle"] as? String == circle)
        #expect((arrivals["members"] as? [[String: Any]])?.allSatisfy { $0["joinedCircle"] as? Bool == true } == true, "\(arrivals)")

        let bob = cli.path("lab/bob")
        try cli.ok(["item", "add", bob, "--app", "com.example.mail", "--account", "from-lab", "--value", "b", "--sync"], environment: second)
        try cli.ok(["sync", "now", bob], environment: second)
        try cli.ok(["sync", "now", alice], environment: first)
        let got = try cli.ok(["item", "get", alice, "--app", "com.example.mail", "--account", "from-lab", "--sync", "yes"], environment: first)
        #expect(got.text == "b")
        // `up` again: every member is in the circle, so nothing asks.
        let again = try cli.ok(["fleet", "up", lab] + labRoot, environment: second)
        #expect(!again.stderr.contains("asks to join") && !again.text.contains("asks to join"))
    }
}
