import Foundation
import KeychainTesting
import Testing

/// The contract a script relies on, as one table: every command, on each kind of problem it can
/// meet, exits with the status `keyferry exit-codes` gives that kind, prints one JSON failure
/// with `--json` (`error`, `kind`, `exitStatus`), and never lets a control byte reach the
/// terminal. A command cannot join the program without a row here.
@Suite("the command-line contract", .serialized, .blocking)
struct ContractTests {
    /// A kind of problem, and the `kind` its failure carries.
    enum Problem: String {
        case usage, malformed, missingFile, notFound, wrongPasscode, unavailable, damaged, keychain, failed, interrupted

        var kind: String {
            switch self {
            case .usage, .malformed: "invalidInput"
            case .missingFile, .notFound: "notFound"
            case .wrongPasscode: "authentication"
            case .unavailable: "unavailable"
            case .damaged, .failed: "failure"
            case .keychain: "keychain"
            case .interrupted: "interrupted"
            }
        }
    }

    struct Case {
        var problem: Problem
        var arguments: [String]
    }

    /// The devices, files and archives the rows point at, each in the state its name says.
    struct Fixture {
        let cli: CLI
        /// Running, unlocked, com.example.mail installed, in a circle whose relay is gone.
        let phone: String
        /// Running, unlocked: wrong passcodes are tried on it, and count.
        let guarded: String
        /// A device, powered off.
        let off: String
        let nowhere: String
        let wrong: String
        let password: String
        let archive: String
        let damaged: String
        let notArchive: String
        let malformedYAML: String
        let failingScenario: String
        let missingFile: String
        /// Swift source with a keychain trap in it.
        let trapSource: String

        init(_ cli: CLI) throws {
            self.cli = cli
            phone = try cli.poweredDevice("phone")
            guarded = try cli.poweredDevice("guarded")
            off = cli.path("off")
            try cli.ok(["device", "init", off, "--passcode", "123456"])
            nowhere = cli.path("nowhere")
            missingFile = cli.path("missing.txt")
            wrong = cli.path("wrong.txt")
            try Data("000000\n".utf8).write(to: URL(fileURLWithPath: wrong))
            password = cli.path("password.txt")
            try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: password))
            try cli.ok(["item", "add", phone, "--app", "com.example.mail", "--account", "token", "--value", "t"])
            archive = cli.path("phone.kfbackup")
            try cli.ok(["backup", "create", phone, "--out", archive, "--encrypted", "--password-file", password])
            var bytes = try Data(contentsOf: URL(fileURLWithPath: archive))
            bytes[bytes.count / 2] ^= 0x40
            damaged = cli.path("damaged.kfbackup")
            try bytes.write(to: URL(fileURLWithPath: damaged))
            notArchive = cli.path("notes.txt")
            try Data("not an archive\n".utf8).write(to: URL(fileURLWithPath: notArchive))
            malformedYAML = cli.path("bad.yaml")
            try Data("fleet: [unclosed\n".utf8).write(to: URL(fileURLWithPath: malformedYAML))
            failingScenario = cli.path("fails.yaml")
            try Data(
                """
                scenario: a token that never was
                apps:
                  com.example.mail: {team: ABCDE12345}
                devices:
                  phone: {apps: [com.example.mail]}
                items:
                  - {device: phone, app: com.example.mail, account: token, value: t}
                steps:
                  - expect: {device: phone, app: com.example.mail, account: token, value: other}

                """.utf8
            ).write(to: URL(fileURLWithPath: failingScenario))
            trapSource = cli.path("Store.swift")
            try Data("func save() { SecItemAdd([kSecClass: kSecClassGenericPassword] as CFDictionary, nil) }\n".utf8)
                .write(to: URL(fileURLWithPath: trapSource))
            // A circle whose relay then went away: sync waits for it.
            let relayData = cli.path("relay")
            let url = try cli.ok(["relay", "start", "--data", relayData]).text.trimmingCharacters(in: .whitespacesAndNewlines)
            try cli.ok(["circle", "create", phone, "--relay", url])
            try cli.ok(["relay", "stop", "--data", relayData])
        }
    }

    /// Every command's row: the problems it can meet, each as arguments that cause it. An
    /// unknown option (a usage mistake) is tried on every command besides.
    static func rows(_ f: Fixture) -> [String: [Case]] {
        let app = ["--app", "com.example.mail"]
        return [
            "device init": [
                Case(problem: .malformed, arguments: ["device", "init", f.cli.path("new"), "--grace", "soon"]),
                Case(problem: .missingFile, arguments: ["device", "init", f.cli.path("new"), "--passcode-file", f.missingFile]),
                Case(problem: .malformed, arguments: ["device", "init", f.phone]),
            ],
            "device status": [Case(problem: .notFound, arguments: ["device", "status", f.nowhere])],
            "device unlock": [
                Case(problem: .wrongPasscode, arguments: ["device", "unlock", f.guarded, "--passcode-file", f.wrong]),
                Case(problem: .missingFile, arguments: ["device", "unlock", f.guarded, "--passcode-file", f.missingFile]),
                Case(problem: .unavailable, arguments: ["device", "unlock", f.off, "--passcode", "123456"]),
                Case(problem: .notFound, arguments: ["device", "unlock", f.nowhere, "--passcode", "123456"]),
            ],
            "device lock": [Case(problem: .unavailable, arguments: ["device", "lock", f.off])],
            "device passcode": [
                Case(problem: .wrongPasscode, arguments: ["device", "passcode", f.guarded, "--remove", "--current-file", f.wrong]),
                Case(problem: .usage, arguments: ["device", "passcode", f.guarded]),
            ],
            "device biometry": [
                Case(problem: .usage, arguments: ["device", "biometry", f.phone]),
                Case(problem: .unavailable, arguments: ["device", "biometry", f.off, "--change"]),
            ],
            "device security": [Case(problem: .notFound, arguments: ["device", "security", f.nowhere])],
            "device clock": [
                Case(problem: .malformed, arguments: ["device", "clock", f.phone, "--advance", "-5m"]),
                Case(problem: .unavailable, arguments: ["device", "clock", f.off, "--advance", "5m"]),
            ],
            "node start": [Case(problem: .notFound, arguments: ["node", "start", f.nowhere])],
            "node stop": [Case(problem: .notFound, arguments: ["node", "stop", f.nowhere])],
            "node reboot": [Case(problem: .unavailable, arguments: ["node", "reboot", f.off])],
            "node status": [Case(problem: .notFound, arguments: ["node", "status", f.nowhere])],
            "node run": [Case(problem: .notFound, arguments: ["node", "run", f.nowhere])],
            "app install": [
                Case(problem: .malformed, arguments: ["app", "install", f.phone, "--app", "not a bundle id", "--team", "ABCDE12345"]),
                Case(problem: .unavailable, arguments: ["app", "install", f.off, "--app", "com.example.x", "--team", "ABCDE12345"]),
            ],
            "app uninstall": [Case(problem: .unavailable, arguments: ["app", "uninstall", f.off] + app)],
            "app list": [Case(problem: .unavailable, arguments: ["app", "list", f.off])],
            "app defaults": [
                Case(problem: .notFound, arguments: ["app", "defaults", f.phone, "--app", "com.example.none", "--list"]),
                Case(problem: .notFound, arguments: ["app", "defaults", f.phone] + app + ["--get", "nothing"]),
            ],
            "app file": [
                Case(problem: .missingFile, arguments: ["app", "file", f.phone] + app + ["--write", "a.txt", "--from", f.missingFile]),
                Case(problem: .notFound, arguments: ["app", "file", f.phone] + app + ["--read", "none.txt"]),
            ],
            "item add": [
                Case(problem: .keychain, arguments: ["item", "add", f.phone] + app + ["--account", "token", "--value", "again"]),
                Case(problem: .missingFile, arguments: ["item", "add", f.phone] + app + ["--account", "x", "--value-file", f.missingFile]),
                Case(problem: .malformed, arguments: ["item", "add", f.phone] + app + ["--account", "x", "--value", "v", "--accessible", "sometimes"]),
                Case(problem: .notFound, arguments: ["item", "add", f.phone, "--app", "com.example.none", "--account", "x", "--value", "v"]),
            ],
            "item get": [
                Case(problem: .keychain, arguments: ["item", "get", f.phone] + app + ["--account", "none"]),
                Case(problem: .unavailable, arguments: ["item", "get", f.off] + app + ["--account", "token"]),
                Case(problem: .notFound, arguments: ["item", "get", f.nowhere] + app + ["--account", "token"]),
                Case(problem: .malformed, arguments: ["item", "get", f.phone] + app + ["--persistent-ref", "not base64!"]),
            ],
            "item update": [Case(problem: .keychain, arguments: ["item", "update", f.phone] + app + ["--account", "none", "--set-value", "v"])],
            "item delete": [Case(problem: .keychain, arguments: ["item", "delete", f.phone] + app + ["--account", "none"])],
            "item list": [Case(problem: .unavailable, arguments: ["item", "list", f.off])],
            "fleet up": [
                Case(problem: .missingFile, arguments: ["fleet", "up", f.missingFile]),
                Case(problem: .malformed, arguments: ["fleet", "up", f.malformedYAML]),
            ],
            "fleet status": [Case(problem: .malformed, arguments: ["fleet", "status", f.malformedYAML])],
            "fleet down": [Case(problem: .missingFile, arguments: ["fleet", "down", f.missingFile])],
            "backup create": [
                Case(
                    problem: .missingFile,
                    arguments: ["backup", "create", f.phone, "--out", f.cli.path("x.kfb"), "--encrypted", "--password-file", f.missingFile]),
                // A powered-off device is backed up in place, given its passcode.
                Case(problem: .wrongPasscode, arguments: ["backup", "create", f.off, "--out", f.cli.path("x.kfb"), "--unencrypted"]),
                Case(
                    problem: .wrongPasscode, arguments: ["backup", "create", f.off, "--out", f.cli.path("x.kfb"), "--unencrypted", "--passcode-file", f.wrong]),
                Case(problem: .notFound, arguments: ["backup", "create", f.nowhere, "--out", f.cli.path("x.kfb"), "--unencrypted"]),
            ],
            "backup inspect": [
                Case(problem: .missingFile, arguments: ["backup", "inspect", f.missingFile]),
                Case(problem: .malformed, arguments: ["backup", "inspect", f.notArchive]),
            ],
            "backup verify": [
                Case(problem: .damaged, arguments: ["backup", "verify", f.damaged, "--password-file", f.password]),
                Case(problem: .wrongPasscode, arguments: ["backup", "verify", f.archive, "--password-file", f.wrong]),
                Case(problem: .malformed, arguments: ["backup", "verify", f.notArchive]),
            ],
            "restore": [
                Case(problem: .damaged, arguments: ["restore", f.damaged, "--to", f.off, "--password-file", f.password, "--passcode", "123456"]),
                Case(problem: .wrongPasscode, arguments: ["restore", f.archive, "--to", f.off, "--password-file", f.wrong, "--passcode", "123456"]),
                Case(problem: .wrongPasscode, arguments: ["restore", f.archive, "--to", f.off, "--password-file", f.password]),
                Case(problem: .missingFile, arguments: ["restore", f.missingFile, "--to", f.off]),
                Case(problem: .notFound, arguments: ["restore", f.archive, "--to", f.nowhere, "--password-file", f.password]),
            ],
            "transfer": [
                Case(problem: .unavailable, arguments: ["transfer", f.off, "--to", f.guarded]),
                Case(problem: .notFound, arguments: ["transfer", f.phone, "--to", f.nowhere]),
            ],
            "survival": [
                Case(problem: .notFound, arguments: ["survival", f.nowhere]),
                Case(problem: .wrongPasscode, arguments: ["survival", f.off, "--passcode-file", f.wrong]),
                Case(problem: .notFound, arguments: ["survival", f.phone, "--html", f.cli.path("no/such/page.html")]),
            ],
            "scenario run": [
                Case(problem: .missingFile, arguments: ["scenario", "run", f.missingFile]),
                Case(problem: .malformed, arguments: ["scenario", "run", f.malformedYAML]),
                Case(problem: .failed, arguments: ["scenario", "run", f.failingScenario]),
            ],
            "audit": [Case(problem: .notFound, arguments: ["audit", f.nowhere])],
            "lint": [
                Case(problem: .notFound, arguments: ["lint", f.nowhere]), Case(problem: .usage, arguments: ["lint"]),
                Case(problem: .failed, arguments: ["lint", f.trapSource]),
            ],
            "circle create": [
                Case(problem: .malformed, arguments: ["circle", "create", f.guarded, "--relay", "not an address"]),
                Case(problem: .unavailable, arguments: ["circle", "create", f.off, "--relay", "127.0.0.1:7"]),
            ],
            "circle join": [
                Case(problem: .notFound, arguments: ["circle", "join", f.guarded, "--sponsor", f.nowhere]),
                Case(problem: .missingFile, arguments: ["circle", "join", f.guarded, "--voucher", f.missingFile]),
                Case(problem: .malformed, arguments: ["circle", "join", f.guarded, "--voucher", f.malformedYAML]),
                Case(problem: .usage, arguments: ["circle", "join", f.guarded, "--circle", "6F9619FF-8B86-D011-B42D-00C04FC964FF"]),
            ],
            "circle requests": [
                Case(problem: .notFound, arguments: ["circle", "requests", f.nowhere]),
                Case(problem: .notFound, arguments: ["circle", "requests", f.guarded]),
            ],
            "circle approve": [
                Case(problem: .notFound, arguments: ["circle", "approve", f.guarded, "123456"]),
                Case(problem: .malformed, arguments: ["circle", "approve", f.phone, "12x"]),
            ],
            "circle decline": [Case(problem: .notFound, arguments: ["circle", "decline", f.guarded, "123 456"])],
            "circle identity": [
                Case(problem: .notFound, arguments: ["circle", "identity", f.nowhere]),
                Case(problem: .malformed, arguments: ["circle", "identity", f.phone]),
            ],
            "circle vouch": [
                Case(problem: .missingFile, arguments: ["circle", "vouch", f.phone, "--for", f.missingFile, "--out", f.cli.path("v")]),
                Case(problem: .malformed, arguments: ["circle", "vouch", f.phone, "--for", f.malformedYAML, "--out", f.cli.path("v")]),
            ],
            "circle remove": [
                Case(problem: .notFound, arguments: ["circle", "remove", f.nowhere, "--peer", "nobody"]),
                // Its relay is gone: who is a member cannot be read.
                Case(problem: .unavailable, arguments: ["circle", "remove", f.phone, "--peer", "nobody"]),
            ],
            "circle leave": [Case(problem: .unavailable, arguments: ["circle", "leave", f.off])],
            "circle status": [Case(problem: .notFound, arguments: ["circle", "status", f.nowhere])],
            "sync now": [
                Case(problem: .unavailable, arguments: ["sync", "now", f.phone, "--timeout", "1"]),
                Case(problem: .interrupted, arguments: ["sync", "now", f.phone, "--timeout", "600"]),
            ],
            "sync status": [Case(problem: .notFound, arguments: ["sync", "status", f.nowhere])],
            "relay serve": [
                Case(problem: .malformed, arguments: ["relay", "serve", "--data", f.cli.path("r"), "--listen", "nowhere"]),
                Case(problem: .usage, arguments: ["relay", "serve", "--data", f.cli.path("r"), "--listen", "0.0.0.0:0"]),
            ],
            "relay start": [Case(problem: .usage, arguments: ["relay", "start", "--data", f.cli.path("r"), "--listen", "0.0.0.0:0"])],
            "relay stop": [Case(problem: .usage, arguments: ["relay", "stop"])],
            "key create": [
                Case(problem: .malformed, arguments: ["key", "create", f.phone] + app + ["--type", "dsa", "--tag", "t"]),
                Case(problem: .unavailable, arguments: ["key", "create", f.off] + app + ["--type", "ec", "--tag", "t"]),
            ],
            "demo": [Case(problem: .missingFile, arguments: ["demo", "--fleet", f.missingFile])],
            "exit-codes": [Case(problem: .usage, arguments: ["exit-codes", "extra"])],
            "help": [Case(problem: .usage, arguments: ["help", "nosuchcommand"])],
        ]
    }

    /// Commands that print no JSON: a story on the terminal, help, and the node process itself.
    static let withoutJSON: Set<String> = ["demo", "help", "node run"]

    @Test("every command has a row; each problem exits as `keyferry exit-codes` says, with one JSON failure, and no control byte")
    func table() throws {
        let cli = try CLI()
        let statuses = try Self.statuses(cli)
        let commands = try Self.commands(cli)
        let fixture = try Fixture(cli)
        let rows = Self.rows(fixture)
        #expect(
            Set(rows.keys) == Set(commands),
            "commands without a row: \(Set(commands).subtracting(rows.keys).sorted()); rows of no command: \(Set(rows.keys).subtracting(commands).sorted())")

        for command in commands.sorted() {
            let path = command.split(separator: " ").map(String.init)
            let cases = (rows[command] ?? []) + [Case(problem: .usage, arguments: path + ["--no-such-option"])]
            for problem in cases {
                let expected = try #require(statuses[problem.problem.kind], "exit-codes has no status for \(problem.problem.kind)")
                let shown = "keyferry \(problem.arguments.joined(separator: " ")) (\(problem.problem))"
                let text = problem.problem == .interrupted ? try cli.interrupt(problem.arguments, onceItSays: "waiting for") : try cli.run(problem.arguments)
                #expect(text.status == expected, "\(shown): exit \(text.status), not \(expected)\n\(text.stderr)")
                // A failed scenario's report is its output; every other failure is a sentence on stderr.
                #expect(!(problem.problem == .failed ? text.text : text.stderr).isEmpty, "\(shown): nothing says what went wrong")
                Self.expectNoControlBytes(text.text + text.stderr, in: shown)
                guard !Self.withoutJSON.contains(command), problem.problem != .interrupted else { continue }
                let json = try cli.run(problem.arguments + ["--json"])
                #expect(json.status == expected, "\(shown) --json: exit \(json.status), not \(expected)\n\(json.stderr)")
                // A scenario that fails answers with its results, not an error.
                if problem.problem == .failed { continue }
                let object = try? JSONSerialization.jsonObject(with: json.stdout) as? [String: Any]
                #expect(object?["error"] is String, "\(shown) --json: no error sentence in \(json.text)")
                #expect(object?["kind"] as? String == problem.problem.kind, "\(shown) --json: kind \(object?["kind"] ?? "none")")
                #expect(object?["exitStatus"] as? Int == Int(expected), "\(shown) --json: exitStatus \(object?["exitStatus"] ?? "none")")
            }
        }
    }

    @Test("names carrying ESC[2J, a carriage return and a right-to-left override reach no terminal raw")
    func hostileNames() throws {
        let cli = try CLI()
        let hostile = "evil\u{1B}[2J\r\u{202E}txt"
        let device = cli.path("hostile")
        try cli.ok(["device", "init", device, "--name", "Alice \(hostile)", "--passcode", "123456"])
        try cli.ok(["node", "start", device])
        try cli.ok(["device", "unlock", device, "--passcode", "123456"])
        try cli.ok(["app", "install", device, "--app", "com.example.mail", "--team", "ABCDE12345"])
        let app = ["--app", "com.example.mail"]
        let runs: [[String]] = [
            ["item", "add", device] + app + ["--account", hostile, "--service", hostile, "--value", "v"],
            ["item", "list", device],
            ["item", "get", device] + app + ["--account", hostile, "--service", hostile, "--return", "attributes"],
            ["app", "file", device] + app + ["--write", hostile, "--text", "x"],
            ["app", "file", device] + app + ["--list"],
            ["app", "defaults", device] + app + ["--set", "\(hostile)=\(hostile)"],
            ["app", "defaults", device] + app + ["--list"],
            ["app", "install", device, "--app", "com.example.\(hostile)", "--team", "ABCDE12345"],
            ["device", "status", device],
            ["node", "status", device],
            ["survival", device],
            ["audit", device],
            ["backup", "create", device, "--out", cli.path("h.kfb"), "--unencrypted"],
            ["backup", "inspect", cli.path("h.kfb")],
            ["item", "get", device] + app + ["--account", hostile],
            [
                "circle", "create", device, "--relay",
                try cli.ok(["relay", "start", "--data", cli.path("relay")]).text.trimmingCharacters(in: .whitespacesAndNewlines),
            ],
            ["circle", "status", device],
            ["sync", "status", device],
            ["device", "passcode", device, "--remove", "--current", "123456"],
        ]
        for arguments in runs {
            let result = try cli.run(arguments)
            let shown = "keyferry \(arguments.prefix(2).joined(separator: " "))"
            // `item get` of the secret prints the secret itself, which is the user's data.
            let output = arguments.last == hostile && arguments[1] == "get" ? result.stderr : result.text + result.stderr
            Self.expectNoControlBytes(output, in: shown)
            // Each runs as it would with a plain name, but the bundle ID, which such a name cannot be.
            #expect(result.status == (arguments[1] == "install" ? 64 : 0), "\(shown): \(result.stderr)")
        }
        let target = cli.path("target")
        try cli.ok(["device", "init", target, "--name", hostile])
        let moved = cli.path("moved")
        try cli.ok(["device", "init", moved, "--name", hostile])
        try cli.ok(["relay", "stop", "--data", cli.path("relay")])
        for arguments in [
            ["transfer", device, "--to", moved, "-v"], ["node", "stop", device], ["circle", "status", device],
            ["restore", cli.path("h.kfb"), "--to", target, "-v", "--accept-unauthenticated"], ["device", "status", target],
        ] {
            let result = try cli.run(arguments)
            Self.expectNoControlBytes(result.text + result.stderr, in: "keyferry \(arguments.prefix(2).joined(separator: " "))")
            #expect(result.status == 0, "keyferry \(arguments.prefix(2).joined(separator: " ")): \(result.stderr)")
        }
    }

    // MARK: Helpers

    /// Exit status by the `kind` a failure carries, as `keyferry exit-codes --json` gives them.
    static func statuses(_ cli: CLI) throws -> [String: Int32] {
        let rows = try #require(try cli.ok(["exit-codes", "--json"]).json() as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: rows.compactMap { row in (row["kind"] as? String).map { ($0, Int32(row["status"] as! Int)) } })
    }

    /// Every command that runs something, by its path (`item get`), from the binary's own
    /// description of itself.
    static func commands(_ cli: CLI) throws -> [String] {
        let dump = try #require(try cli.ok(["--experimental-dump-help"]).json() as? [String: Any])
        var leaves: [String] = []
        func walk(_ command: [String: Any], _ path: [String]) {
            let subcommands = command["subcommands"] as? [[String: Any]] ?? []
            if subcommands.isEmpty, !path.isEmpty { leaves.append(path.joined(separator: " ")) }
            for sub in subcommands { walk(sub, path + [sub["commandName"] as! String]) }
        }
        walk(try #require(dump["command"] as? [String: Any]), [])
        return leaves
    }

    /// No C0 or C1 control but the newline, and none of the marks that turn text's direction.
    static func expectNoControlBytes(_ output: String, in what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let bidi: [ClosedRange<UInt32>] = [0x200E...0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x061C...0x061C]
        let found = output.unicodeScalars.filter { scalar in
            (scalar.properties.generalCategory == .control && scalar != "\n") || bidi.contains { $0.contains(scalar.value) }
        }
        #expect(
            found.isEmpty, "\(what) printed \(found.map { "U+" + String($0.value, radix: 16) }) raw:\n\(output.debugDescription)",
            sourceLocation: sourceLocation)
    }
}
