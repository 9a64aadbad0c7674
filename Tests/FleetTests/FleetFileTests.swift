import Fleet
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Relay
import Testing

@Suite("Fleet files")
struct FleetFileTests {
    static let peers = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Peers")

    @Test("The family fleet: phone, tablet and laptop with passcodes, biometry and a shared group")
    func family() throws {
        let fleet = try FleetFile.load(Self.peers.appendingPathComponent("family.yaml"))
        #expect(fleet.name == "family")
        #expect(fleet.members.map(\.id) == ["phone", "tablet", "laptop"])
        #expect(fleet.members.allSatisfy { $0.passcode != nil })
        #expect(fleet.members.filter(\.biometry).map(\.id) == ["phone", "laptop"])
        let phone = try #require(fleet.members.first)
        #expect(phone.deviceName == "Alice's iPhone")
        #expect(phone.passcode == "123456")
        #expect(phone.grace == 5)
        // Apps of one team share a group across the fleet; another team's app does not.
        let groups = fleet.members.flatMap(\.apps).filter { $0.teamID == "EXMPL12345" }.map { $0.accessGroups.filter { !$0.hasPrefix("group.") } }
        #expect(groups.count >= 4 && groups.allSatisfy { $0 == ["EXMPL12345.com.example.shared"] })
        // Mail and its widget, an extension of it, share an app group too.
        let widget = try #require(phone.apps.first { $0.bundleID == "com.example.mail.widget" })
        #expect(widget.containingApp == "com.example.mail" && widget.appGroups == ["group.com.example.mail"])
        #expect(phone.apps.last?.bundleID == "com.example.mail.widget", "an extension installs after the apps")
        #expect(fleet.members.flatMap(\.apps).contains { $0.teamID != "EXMPL12345" && $0.accessGroups.isEmpty })
        // An unquoted passcode is text, spaces and all.
        #expect(fleet.members[2].passcode == "correct horse battery staple")
        #expect(fleet.members.map(\.profile) == [.iphone, .iphone, .mac], "the MacBook has a Mac's two keychains")
    }

    @Test("The team fleet: two devices")
    func team() throws {
        let fleet = try FleetFile.load(Self.peers.appendingPathComponent("team.yaml"))
        #expect(fleet.name == "team")
        #expect(fleet.members.count == 2)
        #expect(fleet.members.map(\.grace) == [10, 30])
        #expect(fleet.members[1].biometry == false)
        #expect(fleet.relay?.host == "127.0.0.1" && fleet.relay?.port == 0, "the team syncs through its own relay, on a free port")
        #expect(try FleetFile.load(Self.peers.appendingPathComponent("family.yaml")).relay == nil)
    }

    @Test("Defaults: name from the key, no passcode, no biometry, 10 s grace, no apps; numbers are text where text is asked")
    func defaults() throws {
        let fleet = try FleetFile(yaml: "fleet: f\ndevices:\n  solo: {}\n  pin:\n    passcode: 0042\n", file: "f.yaml")
        #expect(fleet.members[0] == FleetFile.Member(id: "solo", deviceName: "solo", passcode: nil, biometry: false, grace: 10, apps: []))
        #expect(fleet.members[1].passcode == "0042")
    }

    /// Each malformed file, with the line, column and field its error must name.
    static let malformed: [(yaml: String, line: Int, field: String?, mentions: String)] = [
        ("fleet: f\ndevices:\n  phone:\n    passcod: '1'\n", 4, "devices.phone.passcod", "unknown field"),
        ("fleet: f\ndevices:\n" + (0...32).map { "  d\($0): {}\n" }.joined(), 3, "devices", "at most 32"),
        ("TOKEN-1234\n", 1, nil, "not a fleet file"),
        ("sync:\n  relay: \"https://a b:443\"\nfleet: f\ndevices:\n  phone: {}\n", 2, "sync.relay", "the relay is `auto`"),
        ("fleet: f\ndevices:\n  phone:\n    passcode: '1234'\n    biometry: often\n", 5, "devices.phone.biometry", "true or false"),
        ("fleet: f\ndevices:\n  phone:\n    passcode: '12'\n", 4, "devices.phone.passcode", "at least 4 characters"),
        ("fleet: f\ndevices:\n  phone:\n    biometry: true\n", 4, "devices.phone.biometry", "needs a passcode"),
        ("fleet: f\ndevices:\n  phone:\n    grace: -3\n", 4, "devices.phone.grace", "not a span of time"),
        ("fleet: f\ndevices:\n  phone:\n    grace: soon\n", 4, "devices.phone.grace", "90s, 10m"),
        ("fleet: f\ndevices:\n  phone:\n    passcode: [1, 2]\n", 4, "devices.phone.passcode", "expected text"),
        ("fleet: f\ndevices:\n  sim:\n    profile: watch\n", 4, "devices.sim.profile", "profiles: iphone, simulator"),
        ("fleet: f\ndevices:\n  sim:\n    profile: simulator\n    passcode: '123456'\n", 5, "devices.sim.passcode", "no passcode to set"),
        ("fleet: f\nsync: {relay: auto}\ndevices:\n  phone: {}\n  sim: {profile: simulator}\n", 2, "sync", "no iCloud Keychain"),
        ("fleet: f\ndevices:\n  phone:\n    passcode: ''\n", 4, "devices.phone.passcode", "cannot be empty"),
        ("fleet: f\ndevices:\n  phone:\n    apps: [com.example.mail]\n", 4, "devices.phone.apps", "not among the fleet's apps"),
        ("fleet: f\napps:\n  com.example.mail:\n    groups: [x]\ndevices:\n  phone: {}\n", 4, "apps.com.example.mail", "missing `team:`"),
        ("fleet: f\napps:\n  com.example.mail:\n    team: lower\ndevices:\n  phone: {}\n", 4, "apps.com.example.mail.team", "not a valid team ID"),
        ("fleet: f\napps:\n  com..mail:\n    team: ABCDE12345\ndevices:\n  phone: {}\n", 3, "apps.com..mail", "not a bundle ID"),
        (
            "fleet: f\napps:\n  com.example.mail:\n    team: ABCDE12345\n    groups: [OTHER.group]\ndevices:\n  phone: {}\n", 5, "apps.com.example.mail.groups",
            "must start with the team ID"
        ),
        ("fleet: f\napps:\n  com.a.w: {team: ABCDE12345, extension-of: com.b}\ndevices:\n  d: {}\n", 3, "apps.com.a.w.extension-of", "starts with its app's"),
        ("fleet: f\napps:\n  com.a.w: {team: ABCDE12345, extension-of: com.a}\ndevices:\n  d: {}\n", 3, "apps.com.a.w", "names no app of `apps:`"),
        (
            "fleet: f\napps:\n  com.a: {team: ABCDE12345}\n  com.a.w: {team: ABCDE12345, extension-of: com.a}\ndevices:\n  d: {apps: [com.a.w]}\n", 6,
            "devices.d.apps", "list com.a on this device too"
        ),
        ("fleet: f\ndevices:\n  ../escape:\n    passcode: '1'\n", 3, "devices.../escape", "cannot name a device directory"),
        ("fleet: my fleet\ndevices:\n  phone: {}\n", 1, "fleet", "cannot name a fleet"),
        ("devices:\n  phone: {}\n", 1, nil, "missing `fleet:`"),
        ("fleet: f\n", 1, nil, "missing `devices:`"),
        ("fleet: f\ndevices: {}\n", 2, "devices", "at least one device"),
        ("fleet: f\ndevices:\n  - phone\n", 3, "devices", "expected a mapping"),
        ("fleet: f\nrelay: x\ndevices:\n  phone: {}\n", 2, "relay", "unknown field"),
        ("fleet: f\ndevices:\n  phone: {passcode: '1'\n", 4, nil, "not valid YAML"),
        ("fleet: f\ndevices:\n  phone: {}\n  phone: {}\n", 3, nil, "appears twice"),
        ("", 1, nil, "empty"),
        ("fleet: f\nsync: {}\ndevices:\n  phone: {}\n", 2, "sync", "missing `relay:`"),
        ("fleet: f\nsync:\n  relay: 7700\ndevices:\n  phone: {}\n", 3, "sync.relay", "HOST:PORT"),
        ("fleet: f\nsync:\n  relay: 127.0.0.1:99999\ndevices:\n  phone: {}\n", 3, "sync.relay", "auto"),
        ("fleet: f\nsync:\n  relay: 127.0.0.1:7700\n  members: [a]\ndevices:\n  phone: {}\n", 4, "sync.members", "unknown field"),
        ("fleet: f\nsync:\n  relay: 127.0.0.1:7700\ndevices:\n  relay: {}\n", 3, "sync", "rename the device `relay`"),
        ("fleet: f\nsync:\n  relay: https://10.0.0.5:7700\n  start: true\ndevices:\n  phone: {}\n", 4, "sync.start", "over http only"),
        ("fleet: f\nsync:\n  relay: auto\n  start: false\ndevices:\n  phone: {}\n", 4, "sync.start", "name the relay"),
        ("fleet: f\nsync:\n  relay: 10.0.0.5:7700\n  start: maybe\ndevices:\n  phone: {}\n", 4, "sync.start", "true or false"),
        ("fleet: f\nsync:\n  relay: 10.0.0.5:7700\ndevices:\n  phone: {}\n", 3, "sync.relay", "on loopback only"),
        ("fleet: f\nsync:\n  relay: https://10.0.0.5:7700\n  circle: nine\ndevices:\n  phone: {}\n", 4, "sync.circle", "its id"),
        ("fleet: f\nsync:\n  relay: auto\n  circle: 59581B40-53A5-8BAA-9A77-7F67BCEAE9B1\ndevices:\n  phone: {}\n", 4, "sync.circle", "start: false"),
    ]

    @Test("A relay the fleet does not run: an https:// address, or HOST:PORT with `start: false`; a device may then be called relay")
    func externalRelay() throws {
        let https = try FleetFile(yaml: "fleet: f\nsync: {relay: 'https://relay.example:7443'}\ndevices:\n  relay: {}\n", file: "f.yaml")
        #expect(https.relay == RelayAddress(host: "relay.example", port: 7443, secure: true) && !https.runsRelay)
        let plain = try FleetFile(yaml: "fleet: f\nsync: {relay: '10.0.0.5:7700', start: false}\ndevices:\n  phone: {}\n", file: "f.yaml")
        #expect(plain.relay == RelayAddress(host: "10.0.0.5", port: 7700) && !plain.runsRelay)
        let own = try FleetFile(yaml: "fleet: f\nsync: {relay: '127.0.0.1:7700'}\ndevices:\n  phone: {}\n", file: "f.yaml")
        #expect(own.runsRelay && own.circle == nil)
        let elsewhere = try FleetFile(
            yaml: "fleet: f\nsync: {relay: 'https://relay.example:7443', circle: 59581b40-53a5-8baa-9a77-7f67bceae9b1}\ndevices:\n  phone: {}\n", file: "f.yaml"
        )
        #expect(elsewhere.circle == UUID(uuidString: "59581B40-53A5-8BAA-9A77-7F67BCEAE9B1") && !elsewhere.runsRelay)
    }

    @Test("A device's profile: iphone unless the file says simulator, which may enroll biometry without a passcode")
    func profiles() throws {
        let fleet = try FleetFile(
            yaml: "fleet: f\ndevices:\n  phone: {passcode: '123456'}\n  sim:\n    profile: simulator\n    biometry: true\n", file: "f.yaml")
        #expect(fleet.members.map(\.profile) == [.iphone, .simulator])
        #expect(fleet.members[1].deviceOptions.profile == .simulator && fleet.members[1].deviceOptions.enrollBiometry)
    }

    @Test("A device made as an iPhone is not brought up as a Simulator: nothing starts, and the error says how to fix it")
    func profileOfAnExistingDevice() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try Device.initialize(at: root.appendingPathComponent("sim"), options: DeviceOptions(name: "sim", passcodeHashing: .minimum))
        let fleet = try FleetFile(yaml: "fleet: f\ndevices:\n  sim: {profile: simulator}\n", file: "f.yaml")
        let error = await #expect(throws: FleetError.self) { try await FleetRunner(fleet: fleet, root: root).up() }
        #expect("\(error!)".contains("was made as iphone and the fleet file says simulator"), "\(error!)")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("sim/node.sock").path))
    }

    @Test("A malformed file names the file, the line and the field", arguments: malformed.indices)
    func malformedFile(index: Int) throws {
        let case_ = Self.malformed[index]
        let error = try #require(throws: FleetFileError.self) { try FleetFile(yaml: case_.yaml, file: "fleets/bad.yaml") }
        #expect(error.file == "fleets/bad.yaml")
        #expect(error.line == case_.line, "\(error)")
        #expect(error.field == case_.field, "\(error)")
        #expect(error.problem.contains(case_.mentions), "\(error)")
        #expect(error.description.hasPrefix("fleets/bad.yaml:\(case_.line):"))
    }

    @Test("A root that up made goes with the devices it rolls back; one that was there stays")
    func rollbackRemovesTheRootItMade() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let fleet = try FleetFile(yaml: "fleet: f\ndevices:\n  phone: {}\n", file: "f.yaml")
        // No node can start: the device is made, then taken back.
        let nowhere = URL(fileURLWithPath: "/nonexistent/keyferry")
        let made = base.appendingPathComponent("made")
        let error = await #expect(throws: FleetError.self) { try await FleetRunner(fleet: fleet, root: made, executable: nowhere).up() }
        #expect("\(error!)".contains("device removed"), "\(error!)")
        #expect(!FileManager.default.fileExists(atPath: made.path), "the empty root it made is gone")
        let existing = base.appendingPathComponent("existing")
        try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: true)
        await #expect(throws: FleetError.self) { try await FleetRunner(fleet: fleet, root: existing, executable: nowhere).up() }
        #expect(FileManager.default.fileExists(atPath: existing.path), "a root that was there stays")
    }

    @Test("Every mistake of every app and device is reported at once, each located")
    func everyMistake() throws {
        let yaml = """
            fleet: f
            apps:
              com.example.mail: {team: short}
            devices:
              phone: {passcode: "", apps: [com.example.mail]}
              tablet: {biometry: often}
              laptop: {profile: toaster}

            """
        let errors = try #require(throws: FleetFileErrors.self) { try FleetFile(yaml: yaml, file: "f.yaml") }.errors
        #expect(errors.map(\.line) == [3, 5, 6, 7], "\(errors)")
        #expect(
            errors.map(\.field) == ["apps.com.example.mail.team", "devices.phone.passcode", "devices.tablet.biometry", "devices.laptop.profile"], "\(errors)")
        // One mistake is one error, as before.
        #expect(throws: FleetFileError.self) { try FleetFile(yaml: "fleet: f\ndevices:\n  laptop: {profile: toaster}\n", file: "f.yaml") }
    }

    @Test("An unreadable or non-UTF-8 file is named")
    func unreadable() throws {
        let missing = try #require(throws: FleetFileError.self) {
            try FleetFile.load(URL(fileURLWithPath: "/nonexistent/fleet.yaml"), displayName: "fleet.yaml")
        }
        #expect(missing.description.hasPrefix("fleet.yaml: cannot read"))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString).yaml")
        try Data([0xff, 0xfe, 0x00]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let binary = try #require(throws: FleetFileError.self) { try FleetFile.load(file, displayName: "fleet.yaml") }
        #expect(binary.problem.contains("UTF-8"))
        let large = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString).yaml")
        try Data(repeating: 0x20, count: (1 << 20) + 1).write(to: large)
        defer { try? FileManager.default.removeItem(at: large) }
        let tooLarge = try #require(throws: FleetFileError.self) { try FleetFile.load(large, displayName: "fleet.yaml") }
        #expect(tooLarge.problem.contains("larger than 1 MiB"), "\(tooLarge)")
    }

    @Test("A non-mapping file is not quoted back: a token named by mistake stays out of the error")
    func notQuoted() throws {
        let error = try #require(throws: FleetFileError.self) { try FleetFile(yaml: "TOKEN-1234\n", file: "fleet.yaml") }
        #expect(!error.description.contains("TOKEN"), "\(error)")
    }

    @Test("Relay addresses: hosts that are no URL host are refused, never trapped on")
    func relayAddresses() {
        for bad in ["https://a b:443", "a/b:80", "user@host:80", ":80", "host:65536", "host:-1", "[zz]:80"] {
            #expect(RelayAddress(bad) == nil, "\(bad)")
        }
        #expect(RelayAddress("relay.example:7443")?.url.absoluteString == "http://relay.example:7443")
        #expect(RelayAddress("https://[::1]:7443")?.url.absoluteString == "https://[::1]:7443")
        #expect(RelayAddress.loopback(port: 7700).on(port: 0)?.description == "127.0.0.1:0")
    }
}
