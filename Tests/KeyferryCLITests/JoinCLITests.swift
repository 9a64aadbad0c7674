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

    @Test("a device on another machine asks through a TLS relay, a member approves its code, and both sync both ways; bad codes are refused by name")
    func askAndApprove() throws {
        let cli = try CLI()
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"))
        let (_, line) = try cli.start([
            "relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
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
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"))
        let (_, line) = try cli.start([
            "relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
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
}
