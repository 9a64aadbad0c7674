import Foundation
import KeychainTesting
import KeyferrySystem
import Testing

/// `keyferry scenario run`: the shipped library, failures, malformed files.
@Suite("keyferry scenario run", .blocking)
struct ScenarioCLITests {
    /// The repository's `Peers/scenarios`, found from this source file.
    static let library = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Peers/scenarios")

    static let header = """
        scenario: a test scenario
        apps:
          com.example.mail: {team: ABCDE12345}
        devices:
          phone: {passcode: "123456", apps: [com.example.mail]}
        items:
          - {device: phone, app: com.example.mail, account: alice, value: s3cret}

        """

    /// Writes `text` to a scenario file under the test's root.
    static func file(_ cli: CLI, _ name: String, _ text: String) throws -> String {
        let path = cli.path(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// No node or relay of any scenario is left running.
    static func nothingRunning(under root: String) -> Bool {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return !processes.contains { pid in
            guard Int(pid) != nil, let cmdline = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: cmdline, as: UTF8.self).contains(root)
        }
    }

    @Test("every scenario of the shipped library holds, and the JUnit file says so")
    func library() throws {
        let cli = try CLI()
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.library.path).filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(files.count >= 18)
        let junit = cli.path("results.xml")
        let keep = cli.path("kept")
        let run = try cli.ok(["scenario", "run", "--junit", junit, "--keep", keep] + files.map { Self.library.appendingPathComponent($0).path })
        #expect(run.text.contains("\(files.count) of \(files.count) scenarios passed"))
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains("tests=\"\(files.count)\" failures=\"0\""))
        // Every scenario's source is named in its file.
        for file in files {
            let text = try String(contentsOf: Self.library.appendingPathComponent(file), encoding: .utf8)
            #expect(text.hasPrefix("# Source:"), "\(file) names its source first")
        }
        #expect(Self.nothingRunning(under: keep))
    }

    @Test("a failed expectation: exit 1, the step, what was expected and what came back; every node stopped")
    func failure() throws {
        let cli = try CLI()
        let file = try Self.file(
            cli, "fails.yaml",
            Self.header + """
                steps:
                  - lock: {device: phone, now: true}
                  - expect: {device: phone, app: com.example.mail, account: alice, value: s3cret}
                  - unlock: phone

                """)
        let junit = cli.path("results.xml")
        let keep = cli.path("kept")
        let run = try cli.run(["scenario", "run", file, "--junit", junit, "--keep", keep])
        #expect(run.status == 1)
        #expect(run.text.contains("FAIL 10"))
        #expect(run.text.contains("expected \"s3cret\", got errSecInteractionNotAllowed (-25308)"))
        #expect(!run.text.contains("unlock phone"), "no step runs after the failure")
        #expect(run.text.contains("0 of 1 scenario passed"))
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains("<failure message=\"line 10: expect alice on phone = &quot;s3cret&quot;"))
        #expect(Self.nothingRunning(under: keep))

        let json = try cli.run(["scenario", "run", file, "--json"])
        #expect(json.status == 1)
        let results = try #require(try json.json() as? [[String: Any]])
        #expect((results.first?["steps"] as? [[String: Any]])?.last?["passed"] as? Bool == false)
    }

    @Test("Ctrl-C in the middle of a scenario: exit 130, every node and the relay stopped, its devices removed")
    func interrupted() throws {
        let cli = try CLI()
        let waits = String(repeating: "  - wait: 1m\n", count: 2000)
        let file = try Self.file(cli, "long.yaml", Self.header + "sync: {relay: auto}\nsteps:\n" + waits)
        let temporary = cli.path("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)

        let process = Process()
        process.executableURL = cli.binary
        let junit = cli.path("report.xml")
        process.arguments = ["scenario", "run", file, "--junit", junit]
        process.environment = ProcessInfo.processInfo.environment.merging(["XDG_STATE_HOME": cli.stateHome.path, "TMPDIR": temporary]) { $1 }
        let out = Pipe()
        let err = Pipe()
        defer { [out, err].forEach { $0.closeBothEnds() } }
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Once a wait has run, the devices and the relay are up.
        var stdout = Data()
        while !String(decoding: stdout, as: UTF8.self).contains("wait 1m") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            stdout += chunk
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).contains { $0.hasPrefix("keyferry-scenario-") })
        ProcessControl.send(.interrupt, to: process.processIdentifier)
        stdout += out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        #expect(process.terminationStatus == 130, "\(stderr)")
        #expect(stderr.contains("interrupted: every device and relay of \"a test scenario\" was stopped"), "\(stderr)")
        #expect(!String(decoding: stdout, as: UTF8.self).contains("scenarios passed"))
        #expect(Self.nothingRunning(under: temporary))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the scenario's devices are removed")
        // CI still gets its report: the scenario failed at an "interrupted" step, after the steps it ran.
        let report = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(report.contains("stopped by Ctrl-C or SIGTERM") && report.contains("failures=\"1\""), "\(report)")
    }

    @Test("sandbox file steps: a wrong expectation names what was found")
    func files() throws {
        let cli = try CLI()
        let file = try Self.file(
            cli, "files.yaml",
            Self.header + """
                steps:
                  - file: {device: phone, app: com.example.mail, path: Cache/token, text: old, protection: none}
                  - lock: {device: phone, now: true}
                  - expect-file: {device: phone, app: com.example.mail, path: Cache/token, text: new}

                """)
        let run = try cli.run(["scenario", "run", file])
        #expect(run.status == 1)
        #expect(run.text.contains("expected \"new\", found \"old\""), "\(run.text)")
    }

    @Test(
        "malformed files are refused with FILE:LINE:COLUMN, exit 64, before anything starts",
        arguments: [
            ("steps:\n  - lock: tablet\n", "9:11: steps[0].lock: 'tablet' is not one of the scenario's devices"),
            ("steps:\n  - expect: {device: phone, app: com.example.mail, account: bob, value: x}\n", "no step adds this item"),
            ("steps:\n  - expect: {device: phone, app: com.example.mail, account: alice, status: errSecNope}\n", "'errSecNope' is not a status Keyferry knows"),
            ("steps:\n  - install: {device: phone, app: com.example.none}\n", "'com.example.none' is not among the scenario's apps"),
            ("steps:\n  - restore: {archive: never.kfb, to: phone}\n", "no earlier `backup:` step makes archive 'never.kfb'"),
            ("steps:\n  - wait: soon\n", "'soon' is not a span of time"),
            ("steps:\n  - jump: phone\n", "unknown field; expected one of: lock"),
            ("steps:\n  - lokc: phone\n", "unknown field; did you mean lock? expected one of: lock"),
            ("steps:\n  - sync: phone\n", "in no circle"),
            ("steps: [\n", "not valid YAML"),
            (
                "steps:\n  - file: {device: phone, app: com.example.mail, path: a, text: b, protection: sometimes}\n",
                "'sometimes' is not a file protection class"
            ),
            ("steps:\n  - expect-file: {device: phone, app: com.example.mail, path: a, text: b, absent: true}\n", "expect exactly one of `text:`"),
            ("steps:\n  - backup: {device: phone, archive: ../../victim}\n", "9:38: steps[0].backup.archive: '../../victim' cannot name an archive"),
            ("steps:\n  - backup: {device: phone, archive: /tmp/victim}\n", "cannot name an archive"),
            ("steps:\n  - backup: {device: phone, archive: ..}\n", "cannot name an archive"),
            (
                "steps:\n  - backup: {device: phone, archive: a.kfb}\n  - backup: {device: phone, archive: a.kfb}\n",
                "already makes archive 'a.kfb'"
            ),
            ("steps: " + String(repeating: "[", count: 5000) + "\n", "not valid YAML"),
            ("steps:\n" + String(repeating: "  - lock: phone\n", count: 10_000), "a scenario holds at most 10000"),
        ])
    func malformed(tail: String, problem: String) throws {
        let cli = try CLI()
        let file = try Self.file(cli, "bad.yaml", Self.header + tail)
        let good = try Self.file(cli, "good.yaml", Self.header + "steps:\n  - lock: phone\n")
        let keep = cli.path("kept")
        let run = try cli.run(["scenario", "run", good, file, "--keep", keep])
        #expect(run.status == 64)
        #expect(run.stderr.contains("\(file):"), "names the file: \(run.stderr)")
        #expect(run.stderr.contains(problem), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keep), "nothing started, not even the good file")
    }

    @Test(
        "`fleet:` opens only YAML beside or below the scenario, and an error quotes none of the file",
        arguments: ["/etc/hostname", "../secret.yaml", "sub/../../secret.yaml", "out/secret.yaml", "secret.txt", "token.yaml"])
    func fleetFiles(path: String) throws {
        let cli = try CLI()
        let scenarios = cli.root.appendingPathComponent("scenarios")
        try FileManager.default.createDirectory(at: scenarios, withIntermediateDirectories: true)
        let secret = "TOKEN-\(UUID().uuidString)"
        try "\(secret)\n".write(to: cli.root.appendingPathComponent("secret.yaml"), atomically: true, encoding: .utf8)
        try "\(secret)\n".write(to: scenarios.appendingPathComponent("secret.txt"), atomically: true, encoding: .utf8)
        try "\(secret)\n".write(to: scenarios.appendingPathComponent("token.yaml"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(at: scenarios.appendingPathComponent("out"), withDestinationURL: cli.root)
        let file = try Self.file(cli, "scenarios/s.yaml", "scenario: s\nfleet: \(path)\nsteps:\n  - lock: phone\n")
        for json in [false, true] {
            let run = try cli.run(["scenario", "run", file] + (json ? ["--json"] : []))
            #expect(run.status == 64)
            #expect(run.stderr.contains("\(file):"), "\(run.stderr)")
            #expect(!run.text.contains(secret) && !run.stderr.contains(secret), "the file's content is quoted: \(run.stderr)\(run.text)")
        }
    }

    @Test(
        "internet passwords by server and protocol, keys by tag: added, read, moved by Quick Start as Apple moves them, updated and deleted; an update answers a prompt as its user"
    )
    func internetPasswordsAndKeys() throws {
        let cli = try CLI()
        let file = try Self.file(
            cli, "kinds.yaml",
            """
            scenario: internet passwords and keys move by the same rules
            apps:
              com.example.mail: {team: ABCDE12345}
            devices:
              phone: {passcode: "123456", biometry: true, apps: [com.example.mail]}
              newPhone: {passcode: "2468"}
            items:
              - {device: phone, app: com.example.mail, account: alice, server: imap.example.com, protocol: IMAPS, value: pw, accessible: afterFirstUnlock}
              - {device: phone, app: com.example.mail, tag: com.example.mail.signing, accessible: afterFirstUnlockThisDeviceOnly}
              - {device: phone, app: com.example.mail, tag: com.example.mail.se, secure-enclave: true}
              - {device: phone, app: com.example.mail, tag: com.example.mail.rsa, key-type: rsa, bits: 2048}
            steps:
              - expect: {device: phone, app: com.example.mail, account: alice, server: imap.example.com, value: pw}
              - expect: {device: phone, app: com.example.mail, account: alice, server: imap.example.com, protocol: HTTPS, absent: true}
              - expect: {device: phone, app: com.example.mail, tag: com.example.mail.se, present: true}
              - expect-survival: {device: phone, secret: com.example.mail.se, path: encrypted-backup-new-device, outcome: lost}
              - transfer: {from: phone, to: newPhone}
              - expect: {device: newPhone, app: com.example.mail, account: alice, server: imap.example.com, protocol: IMAPS, value: pw}
              - expect: {device: newPhone, app: com.example.mail, tag: com.example.mail.rsa, present: true}
              - expect: {device: newPhone, app: com.example.mail, tag: com.example.mail.signing, absent: true}
              - expect: {device: newPhone, app: com.example.mail, tag: com.example.mail.se, absent: true}
              - update: {device: newPhone, app: com.example.mail, account: alice, server: imap.example.com, value: pw2}
              - add: {device: phone, app: com.example.mail, account: guarded, value: g, access-control: biometryCurrentSet}
              - update: {device: phone, app: com.example.mail, account: guarded, value: h, status: errSecInteractionNotAllowed}
              - update: {device: phone, app: com.example.mail, account: guarded, value: h, user: face}
              - expect: {device: phone, app: com.example.mail, account: guarded, user: face, value: h}
              - expect: {device: newPhone, app: com.example.mail, account: alice, server: imap.example.com, value: pw2}
              - delete: {device: newPhone, app: com.example.mail, tag: com.example.mail.rsa}
              - expect: {device: newPhone, app: com.example.mail, tag: com.example.mail.rsa, absent: true}

            """)
        let run = try cli.run(["scenario", "run", file])
        #expect(run.status == 0, "\(run.text)\(run.stderr)")
        #expect(run.text.contains("make a Secure Enclave key com.example.mail.se on phone"), "\(run.text)")
        // A key's present expectation fails where the key is not.
        let wrong = try Self.file(
            cli, "wrong.yaml",
            """
            scenario: a key that does not come along
            apps:
              com.example.mail: {team: ABCDE12345}
            devices:
              phone: {apps: [com.example.mail]}
              newPhone: {}
            items:
              - {device: phone, app: com.example.mail, tag: k, accessible: whenUnlockedThisDeviceOnly}
            steps:
              - transfer: {from: phone, to: newPhone}
              - expect: {device: newPhone, app: com.example.mail, tag: k, present: true}

            """)
        let failed = try cli.run(["scenario", "run", wrong])
        #expect(failed.status == 1 && failed.text.contains("expected the item, got errSecItemNotFound"), "\(failed.text)")
    }

    @Test("a file's mistakes are reported together, each located, with what was meant")
    func everyMistakeAtOnce() throws {
        let cli = try CLI()
        let file = try Self.file(
            cli, "typos.yaml",
            """
            scenario: typos
            apps:
              com.example.mail: {team: ABCDE12345}
            devices:
              phone: {apps: [com.example.mail]}
            items:
              - {device: phone, app: com.example.mail, tag: t, account: x}
              - {device: phone, app: com.example.mail, account: a, value: v, accesible: always}
            steps:
              - expect: {device: phone, app: com.example.mail, tag: t, value: v}
              - expect-survival: {device: phone, secret: a, path: icloud, outcome: kept}
              - lokc: phone

            """)
        let run = try cli.run(["scenario", "run", file, "--json"])
        #expect(run.status == 64)
        let problems = try #require(try run.object()["problems"] as? [String])
        #expect(problems.count == 5, "\(problems)")
        for (line, hint) in [
            (7, "`tag:` alone"), (8, "did you mean accessible?"), (10, "a key's data"), (11, "did you mean icloud-keychain?"), (12, "did you mean lock?"),
        ] {
            #expect(problems.contains { $0.hasPrefix("\(file):\(line):") && $0.contains(hint) }, "line \(line): \(problems)")
        }
    }

    @Test("a missing file is a clear error")
    func missing() throws {
        let cli = try CLI()
        let run = try cli.run(["scenario", "run", cli.path("nope.yaml")])
        #expect(run.status == 5)
        #expect(run.stderr.contains("no such file"))
    }
}
