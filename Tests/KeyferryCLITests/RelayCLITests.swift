import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import KeyferrySystem
import Node
import NodeControl
import Relay
import RelayHTTP
import SyncWire
import Synchronization
import Testing

@Suite("keyferry relay", .blocking)
struct RelayCLITests {
    @Test("relay serve announces its address, serves pulls, keeps its data, and stops on SIGTERM")
    func serves() async throws {
        let cli = try CLI()
        let data = cli.path("relay")
        let (process, line) = try cli.start(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0", "--json"])
        let announced = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let url = try #require((announced["url"] as? String).flatMap(URL.init(string:)))
        let circle = UUID()
        let client = RelayClient(url: url)
        #expect(try await client.pull(circle: circle, stream: .envelopes, after: 0).isEmpty)
        let stranger = await #expect(throws: RelayError.self) { try await client.push([[1, 2, 3]], circle: circle, stream: .envelopes, proof: nil) }
        #expect("\(stranger!)".contains("there is no circle"), "\(stranger!)")

        let port = url.port!
        let busy = try cli.run(["relay", "serve", "--data", cli.path("other"), "--listen", "127.0.0.1:\(port)"])
        #expect(busy.status == 6 && busy.stderr.contains("cannot listen on 127.0.0.1:\(port)"), "\(busy.stderr)")
        let twice = try cli.run(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0"])
        #expect(twice.status == 6 && twice.stderr.contains("a relay already serves"), "\(twice.stderr)")
        #expect(RelayLauncher.running(data: URL(fileURLWithPath: data)) == url)

        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(FileManager.default.fileExists(atPath: data + "/relay.sqlite"))
        #expect(try String(contentsOfFile: data + "/relay.log", encoding: .utf8).contains("relay up"))
    }

    @Test(
        "two relays on one PostgreSQL database serve one log and one circle, each device syncing through its own; the password comes from a file or the environment, never the address, and a wrong one is named",
        .enabled(if: RelayCLITests.postgres != nil || ProcessInfo.processInfo.environment["CI"] != nil, "needs the PostgreSQL server scripts/test starts"))
    func postgresRelays() async throws {
        let cli = try CLI()
        let database = try #require(Self.postgres, "KEYFERRY_POSTGRES is not set: run the tests with scripts/test")
        let password = try #require(ProcessInfo.processInfo.environment["PGPASSWORD"])
        let inAddress = try cli.run([
            "relay", "serve", "--data", cli.path("r"), "--database", database.replacingOccurrences(of: "keyferry@", with: "keyferry:\(password)@"),
        ])
        #expect(inAddress.status == 64 && inAddress.stderr.contains("carries a password"), "\(inAddress.stderr)")
        let wrongFile = cli.path("wrong-password")
        try "not the password\n".write(toFile: wrongFile, atomically: true, encoding: .utf8)
        let wrong = try cli.run(["relay", "serve", "--data", cli.path("r"), "--database", database, "--database-password-file", wrongFile])
        #expect(wrong.status == 1 && wrong.stderr.contains("password authentication failed"), "\(wrong.stderr)")

        let rightFile = cli.path("password")
        try (password + "\n").write(toFile: rightFile, atomically: true, encoding: .utf8)
        let serve = ["--database", database, "--database-password-file", rightFile, "--listen", "127.0.0.1:0", "--json"]
        let (first, firstLine) = try cli.start(["relay", "serve", "--data", cli.path("r1")] + serve)
        let (second, secondLine) = try cli.start(["relay", "serve", "--data", cli.path("r2")] + serve)
        defer {
            for process in [first, second] where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        func client(_ line: String) throws -> RelayClient {
            let announced = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return RelayClient(url: try #require((announced["url"] as? String).flatMap(URL.init(string:))))
        }
        let (a, b) = (try client(firstLine), try client(secondLine))
        let history = CircleHistory(creator: DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()), name: "phone")
        #expect(try await a.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership, proof: nil) == history.entries.count)
        #expect(try await b.pull(circle: history.circle, stream: .membership, after: 0).map(\.body) == history.entries.map(\.bytes))
        #expect(
            try await b.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership, proof: nil) == 0,
            "held already, whichever relay took it")

        // Two devices of one circle, each syncing through its own relay of the database.
        let (phone, tablet) = (cli.path("phone"), cli.path("tablet"))
        for device in [phone, tablet] {
            try cli.ok(["device", "init", device, "--name", URL(fileURLWithPath: device).lastPathComponent])
            try cli.ok(["node", "start", device])
            try cli.ok(["app", "install", device, "--app", "com.example.mail", "--team", "ABCDE12345"])
        }
        try cli.ok(["circle", "create", phone, "--relay", a.base.absoluteString])
        try cli.ok(["circle", "join", tablet, "--sponsor", phone, "--relay", b.base.absoluteString])
        #expect(try cli.ok(["circle", "status", tablet, "--json"]).object()["relay"] as? String == b.base.absoluteString)
        try cli.ok(["item", "add", phone, "--app", "com.example.mail", "--account", "from-phone", "--value", "p", "--sync"])
        try cli.ok(["item", "add", tablet, "--app", "com.example.mail", "--account", "from-tablet", "--value", "t", "--sync"])
        for device in [phone, tablet, phone] { try cli.ok(["sync", "now", device]) }
        #expect(try cli.ok(["item", "get", tablet, "--app", "com.example.mail", "--account", "from-phone", "--sync", "yes"]).text == "p")
        #expect(try cli.ok(["item", "get", phone, "--app", "com.example.mail", "--account", "from-tablet", "--sync", "yes"]).text == "t")
        for device in [phone, tablet] { try cli.ok(["node", "stop", device]) }
        for process in [first, second] {
            process.terminate()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        #expect(!FileManager.default.fileExists(atPath: cli.path("r1") + "/relay.sqlite"), "the records are in PostgreSQL, not beside the log")
    }

    static let postgres = ProcessInfo.processInfo.environment["KEYFERRY_POSTGRES"]

    @Test(
        "relay serve beyond loopback is told who may create circles; with --admission token FILE, circle create needs --admission-token, and a refused creation leaves the node in no circle"
    )
    func admission() throws {
        let cli = try CLI()
        let untold = try cli.run(["relay", "serve", "--data", cli.path("r0"), "--listen", "0.0.0.0:0"])
        #expect(untold.status == 64 && untold.stderr.contains("--admission token FILE") && untold.stderr.contains("--admission open"), "\(untold.stderr)")
        let unknown = try cli.run(["relay", "serve", "--data", cli.path("r0"), "--admission", "maybe"])
        #expect(unknown.status == 64 && unknown.stderr.contains("`open` or `token FILE`"), "\(unknown.stderr)")
        let absent = try cli.run(["relay", "serve", "--data", cli.path("r0"), "--admission", "token", cli.path("no-tokens")])
        #expect(absent.status == 5 && absent.stderr.contains("cannot be read"), "\(absent.stderr)")
        let retention = try cli.run(["relay", "serve", "--data", cli.path("r0"), "--retention", "soon"])
        #expect(retention.status == 64 && retention.stderr.contains("soon"), "\(retention.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.path("r0")), "a relay that does not start makes nothing")

        let tokens = cli.path("tokens")
        try "team-token-6f1c2a9e44d0\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let (_, line) = try cli.start(["relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--admission", "token", tokens, "--json"])
        let relay = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
        let phone = try cli.poweredDevice("phone")
        let refused = try cli.run(["circle", "create", phone, "--relay", relay])
        #expect(refused.status != 0 && refused.stderr.contains("admission token"), "\(refused.stderr)")
        let after = try cli.run(["circle", "status", phone])
        #expect(after.text.contains("in no circle"), "no circle after a refused creation: \(after.text)")
        let wrongFile = cli.path("wrong")
        try "someone-elses-token-0000\n".write(toFile: wrongFile, atomically: true, encoding: .utf8)
        let wrong = try cli.run(["circle", "create", phone, "--relay", relay, "--admission-token", wrongFile])
        #expect(wrong.status != 0 && wrong.stderr.contains("not one this relay holds"), "\(wrong.stderr)")
        let created = try cli.ok(["circle", "create", phone, "--relay", relay, "--admission-token", tokens, "--json"]).object()
        #expect((created["members"] as? [Any])?.count == 1)
        // Joining asks for no token: the sponsor's signature admits the device.
        let tablet = try cli.poweredDevice("tablet")
        #expect((try cli.ok(["circle", "join", tablet, "--sponsor", phone, "--json"]).object()["members"] as? [Any])?.count == 2)
    }

    @Test("a relay killed outright leaves its announcement; a live process under that pid is never taken for it, nor signalled")
    func killedRelay() async throws {
        let cli = try CLI()
        let data = URL(fileURLWithPath: cli.path("relay"))
        let (process, _) = try cli.start(["relay", "serve", "--data", data.path, "--listen", "127.0.0.1:0", "--json"])
        ProcessControl.send(.kill, to: process.processIdentifier)
        process.waitUntilExit()
        // The pid reused by another process: this test's own.
        let stale = RelayAnnouncement(url: "http://127.0.0.1:9", pid: ProcessInfo.processInfo.processIdentifier)
        try JSONEncoder().encode(stale).write(to: RelayAnnouncement.file(in: data))
        #expect(RelayLauncher.running(data: data) == nil)
        #expect(try await RelayLauncher.stop(data: data) == false, "nothing to stop, and this process was not signalled")
    }

    @Test("relay serve speaks https with a certificate; a member trusts it through KEYFERRY_RELAY_CA and syncs, and one that does not says why")
    func tls() throws {
        let cli = try CLI()
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"))
        let (_, line) = try cli.start([
            "relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        let announced = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let url = try #require(announced["url"] as? String)
        #expect(url.hasPrefix("https://127.0.0.1:"))

        let dir = cli.path("phone")
        try cli.ok(["device", "init", dir, "--name", "phone"])
        try cli.ok(["node", "start", dir])
        let untrusted = try cli.run(["circle", "create", dir, "--relay", url])
        #expect(
            untrusted.status != 0 && untrusted.stderr.contains("TLS with the relay failed") && untrusted.stderr.contains("KEYFERRY_RELAY_CA"),
            "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("CERTIFICATE_VERIFY_FAILED") && !untrusted.stderr.contains(".cc:"), "the reason, not BoringSSL's stack")
        // The variable set for the command but not for the node: the error says which reads it.
        let lateCA = try cli.run(["circle", "create", dir, "--relay", url], environment: ["KEYFERRY_RELAY_CA": pki.authority.path])
        #expect(lateCA.status == 6 && lateCA.stderr.contains("a node reads it when it starts"), "\(lateCA.stderr)")
        try cli.ok(["node", "stop", dir])
        try cli.ok(["node", "start", dir], environment: ["KEYFERRY_RELAY_CA": pki.authority.path])
        try cli.ok(["circle", "create", dir, "--relay", url])
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345"])
        try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "over-tls", "--value", "v", "--sync"])
        // The node's own loop may push the item before `sync now` does: either way, nothing waits.
        try cli.ok(["sync", "now", dir])
        let status = try cli.ok(["sync", "status", dir, "--json"]).object()
        #expect(status["pending"] as? Int == 0 && status["lastError"] == nil && status["lastExchange"] != nil, "\(status)")

        let plain = try cli.run(["relay", "serve", "--data", cli.path("other"), "--listen", "https://127.0.0.1:0"])
        #expect(plain.status == 64 && plain.stderr.contains("give --tls-certificate and --tls-key"), "\(plain.stderr)")
        let half = try cli.run(["relay", "serve", "--data", cli.path("other"), "--tls-certificate", pki.certificate.path])
        #expect(half.status == 64 && half.stderr.contains("together"), "\(half.stderr)")
        let notPEM = try cli.run([
            "relay", "serve", "--data", cli.path("other"), "--listen", "127.0.0.1:0",
            "--tls-certificate", pki.key.path.replacingOccurrences(of: "relay.key", with: "missing.pem"), "--tls-key", pki.key.path,
        ])
        #expect(notPEM.status == 64 && notPEM.stderr.contains("not a readable PEM certificate chain"), "\(notPEM.stderr)")
    }

    @Test("the relay's TLS is 1.2 or later with forward-secret AEAD suites: TLS 1.1 and RSA key exchange are refused (openssl s_client)")
    func tlsVersions() throws {
        let cli = try CLI()
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"), rsa: true)
        let (_, line) = try cli.start([
            "relay", "serve", "--data", cli.path("relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        let announced = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let port = try #require((announced["url"] as? String)?.split(separator: ":").last.map(String.init))
        // SECLEVEL=0 lets this client offer what the relay must refuse.
        #expect(try TestAuthority.negotiated(port: port, ["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"]) == nil, "TLS 1.1 accepted")
        let rsaKeyExchange = ["-tls1_2", "-cipher", "AES128-SHA:AES256-GCM-SHA384:@SECLEVEL=0"]
        #expect(try TestAuthority.negotiated(port: port, rsaKeyExchange) == nil, "RSA key exchange accepted")
        #expect(try TestAuthority.negotiated(port: port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"]) == nil, "a CBC suite accepted")
        #expect(try TestAuthority.negotiated(port: port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"]) == "ECDHE-RSA-AES128-GCM-SHA256")
        #expect(try TestAuthority.negotiated(port: port, ["-tls1_3"]) != nil)
    }

    @Test("a fleet file naming an https:// relay someone else runs: its devices join one circle through it and sync; the fleet neither starts nor stops it")
    func fleetOnExternalRelay() async throws {
        let cli = try CLI()
        let pki = try TestAuthority(in: cli.root.appendingPathComponent("pki"))
        let (relay, line) = try cli.start([
            "relay", "serve", "--data", cli.path("shared-relay"), "--listen", "127.0.0.1:0", "--json",
            "--tls-certificate", pki.certificate.path, "--tls-key", pki.key.path,
        ])
        defer {
            relay.terminate()
            relay.waitUntilExit()
        }
        let url = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["url"] as! String
        let file = cli.root.appendingPathComponent("remote.yaml")
        try """
        fleet: remote
        sync:
          relay: \(url)
        apps:
          com.example.mail: {team: ABCDE12345}
        devices:
          a: {apps: [com.example.mail]}
          b: {apps: [com.example.mail]}
        """.write(to: file, atomically: true, encoding: .utf8)
        let root = ["--root", cli.path("fleet")]
        let trust = ["KEYFERRY_RELAY_CA": pki.authority.path]
        let up = try cli.ok(["fleet", "up", file.path] + root, environment: trust)
        #expect(up.text.contains("syncing through the relay at \(url)"), "\(up.text)")
        #expect(!FileManager.default.fileExists(atPath: cli.path("fleet") + "/relay"), "no relay of the fleet's own")
        let (a, b) = (cli.path("fleet") + "/a", cli.path("fleet") + "/b")
        let members = (try cli.ok(["circle", "status", a, "--json"]).object()["members"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(Set(members) == ["a", "b"])
        try cli.ok(["item", "add", a, "--app", "com.example.mail", "--account", "shared", "--value", "v", "--sync"])
        try cli.ok(["sync", "now", a])
        try cli.ok(["sync", "now", b])
        #expect(try cli.ok(["item", "get", b, "--app", "com.example.mail", "--account", "shared", "--sync", "yes"]).text == "v")

        let down = try cli.ok(["fleet", "down", file.path, "--json"] + root).object()
        #expect(down["relayStopped"] as? Bool == false)
        #expect(relay.isRunning, "the relay someone else runs is left running")
        let refused = try cli.run(["fleet", "up", file.path, "--relay-port", "0"] + root)
        #expect(refused.status == 64 && refused.stderr.contains("someone else runs"), "\(refused.stderr)")
    }

    @Test("a relay killed with SIGKILL mid-push and started again on its port: the member's retries get through, nothing acknowledged is lost or doubled")
    func killedMidPush() async throws {
        let cli = try CLI()
        let data = cli.path("relay")
        let (first, line) = try cli.start(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0", "--json"])
        let url = try #require((try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["url"] as? String)
        let client = RelayClient(url: try #require(URL(string: url)))
        let one = OneMemberCircle()
        try await one.create(on: client)
        let batches = try one.batches(60)
        let acknowledged = Acknowledged()
        let pusher = Task {
            for batch in batches {
                let proof = one.proof([batch])
                _ = try await client.retrying(until: .now + .seconds(30)) { try await $0.push([batch], circle: one.circle, stream: .envelopes, proof: proof) }
                acknowledged.count.add(1, ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        // Killed mid-push: once the relay has acknowledged a few batches, however long that takes.
        while acknowledged.count.load(ordering: .relaxed) < 5 { try await Task.sleep(for: .milliseconds(5)) }
        let kill = Process()
        kill.executableURL = URL(fileURLWithPath: "/bin/kill")
        kill.arguments = ["-KILL", "\(first.processIdentifier)"]
        try kill.run()
        kill.waitUntilExit()
        first.waitUntilExit()
        #expect(first.terminationReason == .uncaughtSignal)
        let (second, _) = try cli.start(["relay", "serve", "--data", data, "--listen", url])
        defer {
            second.terminate()
            second.waitUntilExit()
        }
        try await pusher.value
        let held = try await client.pull(circle: one.circle, stream: .envelopes, after: 0, limit: 1_000)
        #expect(held.map(\.body) == batches, "every batch once, in the order pushed")
    }

    final class Acknowledged: Sendable {
        let count = Atomic(0)
    }

    @Test("a bad address, a data path that is a file, or a damaged database is refused, and the files are left as they were")
    func badInput() throws {
        let cli = try CLI()
        for listen in ["7700", "127.0.0.1:", "127.0.0.1:70000", ":80", "127.0.0.1:port"] {
            let result = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--listen", listen])
            #expect(result.status == 64 && result.stderr.contains("HOST:PORT"), "\(listen): \(result.stderr)")
        }
        for quota in ["0", "-5M", "12X", "M", "99999999999T"] {
            let result = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--quota", quota])
            #expect(result.status == 64 && result.stderr.contains("such as 500M"), "\(quota): \(result.stderr)")
        }
        for quota in ["0", "12X", "M"] {
            let total = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--total-quota", quota])
            #expect(total.status == 64 && total.stderr.contains("such as 500M"), "\(quota): \(total.stderr)")
        }
        for count in ["0", "many"] {
            let result = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--max-circles", count])
            #expect(result.status == 64 && result.stderr.contains("a count is a whole number from 1"), "\(count): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.path("relay")), "a usage error touches nothing")
        let file = cli.path("not-a-directory")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        let result = try cli.run(["relay", "serve", "--data", file, "--listen", "127.0.0.1:0"])
        #expect(result.status == 64 && result.stderr.contains("is a file"), "\(result.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")

        // A data directory whose database is not one: refused, and the file is left as it was.
        let data = cli.path("damaged")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: data + "/relay.sqlite"))
        let damaged = try cli.run(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0"])
        #expect(damaged.status == 1 && damaged.stderr.contains("cannot keep the relay's database in --data \(data): "), "\(damaged.stderr)")
        #expect(damaged.stderr.contains("not a database"), "\(damaged.stderr)")
        #expect(try String(contentsOfFile: data + "/relay.sqlite", encoding: .utf8) == "keep me")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data) == ["relay.sqlite"])
    }
}

/// A certificate authority of the test's own, and a certificate it signed for 127.0.0.1, made
/// with openssl (which scripts/system-packages installs).
struct TestAuthority {
    let authority: URL
    let certificate: URL
    let key: URL

    /// `rsa`: an RSA relay key, which could also do RSA key exchange (the relay must not).
    init(in directory: URL, rsa: Bool = false) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        authority = directory.appendingPathComponent("ca.pem")
        certificate = directory.appendingPathComponent("relay.pem")
        key = directory.appendingPathComponent("relay.key")
        try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: directory.appendingPathComponent("san.ext"))
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + curve + ["-keyout", path("ca.key"), "-out", authority.path, "-days", "2", "-subj", "/CN=Keyferry test CA"])
        let relayKey = rsa ? ["-newkey", "rsa:2048", "-nodes"] : curve
        try openssl(["req"] + relayKey + ["-keyout", key.path, "-out", path("relay.csr"), "-subj", "/CN=127.0.0.1"])
        try openssl([
            "x509", "-req", "-in", path("relay.csr"), "-CA", authority.path, "-CAkey", path("ca.key"), "-CAcreateserial",
            "-out", certificate.path, "-days", "2", "-extfile", path("san.ext"),
        ])
    }

    /// The cipher a TLS handshake with `openssl s_client` settles on, or nil when it fails.
    static func negotiated(port: String, _ options: [String]) throws -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "s_client", "-connect", "127.0.0.1:\(port)"] + options
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let cipher = text.split(separator: "\n").first { $0.contains("Cipher is ") }.map { String($0.split(separator: " ").last ?? "") }
        return cipher == "(NONE)" ? nil : cipher
    }
}

/// Runs openssl, which must succeed; what it printed on standard output.
@discardableResult
func openssl(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    try #require(process.terminationStatus == 0, "openssl \(arguments.joined(separator: " ")) failed")
    return printed
}
