import ArgumentParser
import Backup
import Fleet
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferrySecurity
import KeyferrySystem
import KeyferryThreads
import Logging
import Node
import NodeControl
import PhoneBackup
import Relay
import RelayHTTP
import RelayPostgres
import Scenario
import SyncWire

/// A short tour of the family fleet, on real nodes: the fleet comes up, the phone's apps store
/// secrets of several classes, the other devices join its circle and receive its synchronizable
/// items through a relay, one of them powers off and on and catches up once unlocked, the
/// phone locks, reboots and changes its face, its backups (Keyferry's archives and a real
/// iPhone's backup folder, which a tool made for phones opens) are
/// restored onto new iPhones with a report of what was lost and why, it loses its passcode,
/// and every read prints Apple's status. The fleet goes down at the end.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Run a short demo: the family fleet comes up and syncs; the phone shows what lock, reboot, passcode changes and a restore onto a new iPhone do to its keychain.",
        discussion: """
            The README's `./scripts/demo` runs it from the repository with a private PostgreSQL \
            server, so the circle syncs through two relays sharing one database; run alone (no \
            KEYFERRY_POSTGRES), it syncs through one relay of its own, and says so.
            """)

    @Option(help: "The family fleet file (the demo tells its story).", completion: .file(extensions: ["yaml"]))
    var fleet = "Peers/family.yaml"
    @Option(help: "Keep the fleet's devices in this directory (new or empty) instead of a temporary one.", completion: .directory)
    var root: String?

    // Named only to say why they are not there: the demo is a story told on a terminal.
    @Flag(help: .hidden) var json = false
    @Flag(name: .shortAndLong, help: .hidden) var quiet = false

    func validate() throws {
        if json || quiet { throw ValidationError("the demo is a story told on the terminal: it has no --json or --quiet.") }
        if let root, let contents = try? FileManager.default.contentsOfDirectory(atPath: root), !contents.isEmpty {
            throw ValidationError("\(root) is not empty; give --root a new directory for the demo's devices.")
        }
    }

    func run() async throws {
        guard FileManager.default.fileExists(atPath: fleet) else {
            throw FleetFileError(
                .noSuchFile, file: fleet,
                problem:
                    "cannot read the fleet file: there is no such file; run the demo from the repository (./scripts/demo), or give --fleet the family fleet's file."
            )
        }
        let file = try FleetFile.load(URL(fileURLWithPath: fleet), displayName: fleet)
        // Short, so the sockets' paths fit.
        let rootURL = URL(fileURLWithPath: root ?? "/tmp/keyferry-demo-\(UUID().uuidString.prefix(8))")
        let runner = FleetRunner(fleet: file, root: rootURL)
        let removeRoot = root == nil
        defer { if removeRoot { try? FileManager.default.removeItem(at: rootURL) } }
        // Ctrl-C stops the tour at its next step and brings the fleet down: no node outlives the
        // demo, which then exits 130 as every command stopped so does.
        do {
            try await interruptibly { try await self.tour(runner) }
        } catch {
            _ = try? await runner.down()
            throw error
        }
    }

    private func tour(_ runner: FleetRunner) async throws {
        guard let member = runner.fleet.members.first(where: { $0.id == "phone" }),
            let passcode = member.passcode, member.biometry,
            Set(member.apps.map(\.bundleID)).isSuperset(of: [Self.mail, Self.widget, Self.bank])
        else {
            throw FleetFileError(
                file: fleet,
                problem:
                    "the demo tells the story of Peers/family.yaml and needs a device `phone` with a passcode, biometry and the apps \(Self.mail), \(Self.widget) and \(Self.bank)."
            )
        }
        let tour = Tour()
        tour.heading("The \(runner.fleet.name) fleet comes up (\(fleet))")
        for arrival in try await runner.up().members {
            tour.say(runner.line(arrival.member, arrival.device?.fleetLine ?? ""))
        }
        let phone = NodeClient(directory: runner.directory(of: member))

        tour.heading("The mail app stores its secrets on \(member.deviceName)")
        let vaultControl = try AccessControl(protection: .whenPasscodeSetThisDeviceOnly, expression: "biometryCurrentSet|or|devicePasscode")
        let items: [(name: String, item: NewItem)] = [
            ("session-token", .generic("session-token", protection: .whenUnlocked)),
            ("push-key", .generic("push-key", protection: .afterFirstUnlockThisDeviceOnly)),
            (
                "imap password",
                NewItem(
                    .internetPassword, attributes: [.server: .string("imap.example.com"), .account: .string("alice"), .protocol: .string("imap")],
                    data: Data("imap-secret".utf8), protection: .afterFirstUnlock, synchronizable: true)
            ),
            (
                "vault-key",
                NewItem(.genericPassword, attributes: [.account: .string("vault-key")], data: Data("vault-secret".utf8), accessControl: vaultControl)
            ),
            ("legacy-pin", .generic("legacy-pin", protection: .always)),
            (
                "signing key",
                NewItem(
                    .key, attributes: [.applicationTag: .data(Data("com.example.mail.signing".utf8)), .keyClass: .number(1)],
                    data: Data("signing-key-secret".utf8), protection: .afterFirstUnlockThisDeviceOnly)
            ),
            (
                "wifi-token",
                NewItem(
                    .genericPassword, attributes: [.account: .string("wifi-token")], data: Data("wifi-token-secret".utf8),
                    protection: .afterFirstUnlockThisDeviceOnly, synchronizable: true)
            ),
        ]
        for (name, item) in items {
            await tour.attempt("add \(name.padded(14)) \(item.itemClass.name.padded(16)) \(item.protectionName)") { try await phone.add(Self.mail, item) }
        }
        _ = try await phone.call(.defaults, NodeAPI.Defaults(bundleID: Self.mail, set: ["signedInUser": "alice@example.com"])) as [String: String]
        tour.say("UserDefaults: signedInUser = alice@example.com (a plaintext property list in the sandbox)")
        // The widget's copy of it: the app group's suite, which the widget reads too.
        let appGroup = member.apps.first { $0.bundleID == Self.mail }?.appGroups.first
        if let appGroup {
            _ =
                try await phone.call(.defaults, NodeAPI.Defaults(bundleID: Self.mail, set: ["signedInUser": "alice@example.com"], group: appGroup))
                as [String: String]
            tour.say("and in its app group's suite (UserDefaults(suiteName: \"\(appGroup)\")), for the widget")
        }
        _ =
            try await phone.call(.file, NodeAPI.File(bundleID: Self.mail, path: "Mail/index.db", contents: Data("mail index".utf8), protection: .complete))
            as NodeAPI.FileContents
        tour.say("Documents/Mail/index.db: a file with complete protection, unreadable while the phone is locked")
        await tour.attempt("the widget reads session-token through the shared group") { try await phone.read(Self.widget, "session-token") }
        await tour.attempt("the bank app, another team's, reads session-token") { try await phone.read(Self.bank, "session-token") }
        await tour.attempt("add session-token again as afterFirstUnlock (phantom mismatch)") {
            try await phone.add(Self.mail, .generic("session-token", protection: .afterFirstUnlock))
        }

        let relay = try await circle(phone: phone, runner: runner, tour: tour)
        defer { relay.cancel() }
        if let tablet = runner.fleet.members.first(where: { $0.id != "phone" && $0.passcode != nil }) {
            try await restart(tablet, phone: phone, runner: runner, tour: tour)
        }
        if let laptop = runner.fleet.members.first(where: { $0.profile == .mac && $0.apps.contains { $0.bundleID == Self.mail } }) {
            try await macKeychains(laptop, runner: runner, tour: tour)
        }

        tour.heading("Alice locks the phone (grace period \(Int(member.grace)) s, in real time)")
        try await phone.send(.lock, NodeAPI.Lock(immediately: false))
        let lockedAt = ContinuousClock.now
        await tour.attempt("at once, read session-token (grace period)") { try await phone.read(Self.mail, "session-token") }
        while try await phone.status().device.protectedDataAvailable, ContinuousClock.now - lockedAt < .seconds(member.grace + 10) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let waited = (ContinuousClock.now - lockedAt).components.seconds
        await tour.attempt("\(waited) s later, read session-token") { try await phone.read(Self.mail, "session-token") }
        await tour.attempt("a push extension reads push-key") { try await phone.read(Self.mail, "push-key") }
        tour.say("device status: \(try await phone.status().device.summary)")

        tour.heading("The phone reboots: before first unlock")
        try await phone.send(.reboot, NodeAPI.Empty())
        await tour.attempt("read push-key") { try await phone.read(Self.mail, "push-key") }
        await tour.attempt("read legacy-pin (always)") { try await phone.read(Self.mail, "legacy-pin") }
        if let appGroup {
            let suite: [String: String] = try await phone.call(.defaults, NodeAPI.Defaults(bundleID: Self.widget, group: appGroup))
            tour.say(
                "the widget, launched now, reads signedInUser from \(appGroup): "
                    + (suite["signedInUser"].map { "\"\($0)\"" } ?? "nothing (the suite reads back empty before first unlock: not signed out)"))
        }
        await tour.attempt("unlock with a wrong passcode") { try await phone.send(.unlock, NodeAPI.Unlock(passcode: "000000")) }
        await tour.attempt("unlock with the passcode") { try await phone.send(.unlock, NodeAPI.Unlock(passcode: passcode)) }

        tour.heading("Face ID and the passcode")
        await tour.attempt("read vault-key with Face ID") { try await phone.read(Self.mail, "vault-key", .responding(.biometryMatch)) }
        try await phone.send(.biometry, NodeAPI.Biometry(action: .change))
        tour.say("a new face is enrolled")
        await tour.attempt("read vault-key with Face ID") { try await phone.read(Self.mail, "vault-key", .responding(.biometryMatch)) }
        await tour.attempt("read vault-key with the passcode") { try await phone.read(Self.mail, "vault-key", .responding(.passcode(passcode))) }
        tour.heading("The mail app's own Swift code calls SecItemAdd, as on iOS (KeyferrySecurity), and `keyferry audit` reads the traps")
        let directory = runner.directory(of: member)
        let report = try await BlockingPool.shared.run { _ in try DemoAppCode.run(device: directory, app: Self.mail) { tour.say($0) } }
        for line in AuditCommand.text(report, device: member.id, cleared: false).split(separator: "\n", omittingEmptySubsequences: false) {
            tour.say(String(line))
        }
        let devices = directory.deletingLastPathComponent()
        try await BlockingPool.shared.run { _ in try lintNextVersion(in: devices, tour: tour) }
        try await newPhone(from: phone, at: directory, runner: runner, tour: tour)

        tour.heading("What survives: every path run for real on scratch copies of the phone (`keyferry survival`)")
        let client = NodeClient(directory: runner.directory(of: member), timeout: .seconds(600))
        let matrix = try await client.survival(app: nil, passcode: passcode)
        for line in matrix.table(colored: ProcessControl.standardOutputIsTerminal).split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2) {
            tour.say(String(line))
        }
        tour.heading("The same secrets on the iOS Simulator, where most keychain tests run (`keyferry survival --compare simulator`)")
        let comparison = try await client.survivalAgainstSimulator(app: nil, passcode: passcode)
        for line in comparison.table().split(separator: "\n") { tour.say(String(line)) }

        let removal = NodeAPI.Passcode(new: nil, current: passcode, remove: true)
        if try await phone.status().device.security != nil {
            tour.heading("Alice, away from home, removes her passcode (Stolen Device Protection, on by default since iOS 26.4)")
            try await phone.send(.security, NodeAPI.Security(away: true))
            do {
                try await phone.send(.passcode, removal)
            } catch let error as DeviceError where error.code == .securityDelay {
                tour.say("held: a one-hour Security Delay starts; vault-key is still there meanwhile")
            }
            await tour.attempt("read vault-key during the delay") { try await phone.read(Self.mail, "vault-key", .responding(.passcode(passcode))) }
            let _: NodeAPI.ClockState = try await phone.call(.clock, NodeAPI.Clock(advance: StolenDeviceProtection.securityDelay))
            tour.say("an hour later (the device's clock moved on), Face ID again, and the passcode goes")
        } else {
            tour.heading("Alice removes her passcode")
        }
        try await phone.send(.passcode, removal)
        tour.say("whenPasscodeSetThisDeviceOnly items are destroyed with it")
        await tour.attempt("read vault-key") { try await phone.read(Self.mail, "vault-key", .responding(.passcode(passcode))) }

        tour.heading("Fleet status")
        let overview = try await runner.status()
        for status in overview.members {
            tour.say(runner.line(status.member, status.device?.fleetLine ?? "not created"))
        }
        if let relay = overview.relay?.url, let circle = overview.circle {
            tour.say(runner.line("circle", "\(circle.members.joined(separator: ", ")), through the relay at \(relay)"))
        }

        tour.heading("The fleet goes down: every class key leaves memory")
        for (member, departure) in try await runner.down().members {
            tour.say(runner.line(member, departure.text))
        }

        tour.heading("What is on disk")
        let secrets = items.map(\.item.data)
        var files = 0
        var hits = 0
        for case let url as URL in FileManager.default.enumerator(at: runner.root, includingPropertiesForKeys: nil) ?? .init() {
            guard !url.hasDirectoryPath, let bytes = try? Data(contentsOf: url) else { continue }
            files += 1
            if url.pathComponents.contains("apps") { continue }  // the sandbox is the app's own plaintext
            hits += secrets.filter { bytes.range(of: $0) != nil }.count
        }
        tour.say("\(files) files; keychain secrets found in plaintext outside app sandboxes: \(hits)")
        tour.say("(UserDefaults stays plaintext, as on iOS: a legacy store is not a keychain)")
        if root != nil { tour.say("The devices stay in \(runner.root.path); `keyferry fleet up \(fleet) --root \(runner.root.path)` brings them back.") }

        try await scenario(tour)
    }

    /// The demo's relays: one on SQLite in the fleet's root; or, when scripts/demo started a
    /// PostgreSQL server (`KEYFERRY_POSTGRES`, `PGPASSWORD`), two relays sharing its
    /// database. The task serves them until cancelled.
    /// They create circles only for holders of `token`, as a relay others reach would.
    private func serveRelays(root: URL, token: String) async throws -> (Task<Void, any Error>, [Int], any RelayStorage) {
        let environment = ProcessInfo.processInfo.environment
        let (announced, announce) = AsyncStream<(Int, any RelayStorage)>.makeStream()
        let logger = Logger(label: "demo") { _ in SwiftLogNoOpLogHandler() }
        let tokens = root.appendingPathComponent("relay-tokens")
        try (token + "\n").write(to: tokens, atomically: true, encoding: .utf8)
        let admission = try RelayAdmission(tokenFile: tokens)
        let serve: @Sendable (any RelayStorage) async throws -> Void = { storage in
            try await RelayServer.run(storage: storage, admission: admission, host: "127.0.0.1", port: 0, logger: logger) {
                announce.yield(($0, storage))
            }
        }
        let relays: Int
        let task: Task<Void, any Error>
        if let url = environment["KEYFERRY_POSTGRES"] {
            let database = try PostgresRelayDatabase(url: url, password: environment[PostgresRelayDatabase.passwordVariable])
            relays = 2
            task = Task {
                defer { announce.finish() }
                try await PostgresRelayStorage.withStorage(database) { first in
                    try await PostgresRelayStorage.withStorage(database) { second in
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask { try await serve(first) }
                            group.addTask { try await serve(second) }
                            try await group.waitForAll()
                        }
                    }
                }
            }
        } else {
            let storage = try SQLiteRelayStorage(directory: root.appendingPathComponent("relay"))
            relays = 1
            task = Task {
                defer { announce.finish() }
                try await serve(storage)
            }
        }
        var ports: [Int] = []
        var storage: (any RelayStorage)?
        for await (port, served) in announced {
            ports.append(port)
            storage = served
            if ports.count == relays { break }
        }
        guard ports.count == relays, let storage else {
            try await task.value
            throw CommandFailure("the demo's relay did not start")
        }
        return (task, ports, storage)
    }

    /// One scenario of the library on fresh devices, as CI runs it (`keyferry scenario run`).
    private func scenario(_ tour: Tour) async throws {
        let file = URL(fileURLWithPath: fleet).deletingLastPathComponent().appendingPathComponent("scenarios/new-phone-restore.yaml")
        guard FileManager.default.fileExists(atPath: file.path) else { return }
        let scenario = try Scenario.load(file, displayName: file.relativePath)
        tour.heading("A scenario file checks what must survive: \(scenario.name) (`keyferry scenario run \(scenario.file)`)")
        let root = URL(fileURLWithPath: "/tmp/keyferry-demo-scenario-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let result = try await ScenarioRunner(scenario: scenario, root: root).run { step in
            tour.say("\(step.passed ? "ok  " : "FAIL") \(step.step)" + (step.failure.map { ": \($0)" } ?? ""))
        }
        tour.say(result.passed ? "every expectation holds (\(String(format: "%.1f", result.seconds)) s)" : "the scenario failed")
    }

    /// The other devices join the phone's circle through the relays the demo runs (returned,
    /// to be stopped at the end), and sync.
    private func circle(phone: NodeClient, runner: FleetRunner, tour: Tour) async throws -> Task<Void, any Error> {
        let token = "demo-\(UUID().uuidString)"
        let (relay, ports, storage) = try await serveRelays(root: runner.root, token: token)
        let others = runner.fleet.members.filter { $0.id != "phone" }
        let port = ports[0]
        let names = others.map(\.deviceName).joined(separator: " and ")
        if ports.count == 1 {
            tour.heading("The phone forms a circle with \(names), through a relay at 127.0.0.1:\(port)")
        } else {
            tour.heading(
                "The phone forms a circle with \(names), through two relays sharing one PostgreSQL database "
                    + "(127.0.0.1:\(ports[0]) and 127.0.0.1:\(ports[1]))")
        }
        tour.say("the relay creates circles only for holders of an admission token (`relay serve --admission token FILE`); the phone has one")
        let created: NodeAPI.CircleStatus = try await phone.call(
            .circleCreate, NodeAPI.CircleCreate(relay: "http://127.0.0.1:\(port)", name: nil, admissionToken: token))
        let clients = others.map { NodeClient(directory: runner.directory(of: $0)) }
        for (index, (member, client)) in zip(others, clients).enumerated() {
            // With two relays, members alternate: the first to join syncs through the second.
            let own = ports[(index + 1) % ports.count]
            guard index == 0, let id = created.circle else {
                let status = try await client.joinCircle(sponsor: phone, relay: "http://127.0.0.1:\(own)")
                tour.say("\(member.deviceName) joins, vouched for by the phone, syncing through 127.0.0.1:\(own): \(status.members.count) members")
                continue
            }
            // As from another machine: through the relay alone, approved by comparing a code.
            let asked: NodeAPI.CircleRequested = try await client.call(
                .circleRequest, NodeAPI.CircleRequest(relay: "http://127.0.0.1:\(own)", circle: id))
            tour.say("\(member.deviceName) asks to join through 127.0.0.1:\(own) alone, as from another machine, and shows code \(asked.code)")
            let pending: NodeAPI.PendingJoins = try await phone.get(.circleRequests)
            for request in pending.requests { tour.say("the phone sees \(request.name) asking, code \(request.code): the codes match") }
            await tour.attempt("the phone approves code 000 000, which no device shows") {
                let _: NodeAPI.PendingJoin = try await phone.call(.circleApprove, NodeAPI.CircleAnswer(code: "000 000"))
            }
            let _: NodeAPI.PendingJoin = try await phone.call(.circleApprove, NodeAPI.CircleAnswer(code: asked.code))
            let joined = try await client.joinedCircle(asked)
            tour.say(
                "the phone approves \(asked.code); \(member.deviceName) checks the voucher against the relay and joins: "
                    + "\(joined.members.count) members")
        }
        for client in [phone] + clients { _ = try await client.call(.syncNow, NodeAPI.SyncNow()) as SyncReport }
        let status: NodeAPI.SyncStatus = try await phone.get(.syncStatus)
        for item in status.skippedDeviceBound { tour.say("the phone keeps \(item) to itself: synchronizable but ThisDeviceOnly") }
        let imap = ItemQuery(
            .internetPassword, attributes: [.server: .string("imap.example.com"), .account: .string("alice")],
            synchronizable: .yes, returning: .data)
        for (member, client) in zip(others, clients) {
            await tour.attempt("on \(member.deviceName), mail reads the imap password (synchronizable)") {
                let _: NodeAPI.Items = try await client.call(.copy, NodeAPI.Search(app: Self.mail, query: imap))
            }
            await tour.attempt("on \(member.deviceName), mail reads session-token (not synchronizable)") { try await client.read(Self.mail, "session-token") }
        }
        if let circle = status.circle {
            let batches = try await storage.records(circle: circle, stream: .envelopes, after: 0, limit: 10_000)
                .filter { !CompactedBatches.isNote($0.body) }.map { try EnvelopeBatch(bytes: $0.body) }
            let held = batches.reduce(0) { $0 + $1.envelopes.count }
            tour.say(
                "\(ports.count == 1 ? "the relay holds" : "the database behind both relays holds") \(held) sealed envelope\(held == 1 ? "" : "s") in \(batches.count) signed batch\(batches.count == 1 ? "" : "es"); it can read none of them"
            )
            // What a stranger who can reach the relay gets: nothing written, so nothing to stop the circle.
            let stranger = RelayClient(url: URL(string: "http://127.0.0.1:\(port)")!)
            await tour.attempt("a stranger pushes a batch of its own to the circle's relay") {
                try await stranger.push([Array("not a member's batch".utf8)], circle: circle, stream: .envelopes, proof: nil)
            }
            await tour.attempt("a stranger without a token creates a circle of its own on the relay") {
                let history = CircleHistory(creator: DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()), name: "stranger")
                try await stranger.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership, proof: nil)
            }
            // Updates supersede: the relay drops what no member needs any more.
            for round in 1...3 {
                let changed: NodeAPI.Changed = try await phone.call(
                    .update, NodeAPI.Update(app: Self.mail, query: imap, changes: ItemChanges(data: Data("imap-secret-\(round)".utf8))))
                _ = changed
                for client in [phone] + clients { _ = try await client.call(.syncNow, NodeAPI.SyncNow()) as SyncReport }
            }
            let after = try await storage.records(circle: circle, stream: .envelopes, after: 0, limit: 10_000)
            let kept = after.filter { !CompactedBatches.isNote($0.body) }.count
            tour.say(
                "after three updates of the imap password, synced each time, the relay holds \(kept) batch\(kept == 1 ? "" : "es"): "
                    + "those whose every version is superseded are dropped, and named in a note so no member counts them missing")
            let tablet: NodeAPI.SyncStatus = try await clients[0].get(.syncStatus)
            for author in tablet.received {
                tour.say(
                    "\(others[0].deviceName) received \(author.name ?? "a former member")'s batches through #\(author.head), "
                        + (author.missing.isEmpty ? "none missing: nothing was withheld" : "missing \(author.missing.joined(separator: ", "))"))
            }
        }
        return relay
    }

    /// The same mail code on a Mac: SecItem reaches the file-based keychain unless told, and a
    /// search without `kSecUseDataProtectionKeychain` reaches both.
    private func macKeychains(_ member: FleetFile.Member, runner: FleetRunner, tour: Tour) async throws {
        let mac = NodeClient(directory: runner.directory(of: member))
        tour.heading("\(member.deviceName) has two keychains: SecItem adds to the file-based one unless told (profile mac)")
        var token = NewItem.generic("mac-token", protection: .whenUnlockedThisDeviceOnly)
        let added: NodeAPI.Items = try await mac.call(.add, NodeAPI.Add(app: Self.mail, item: token))
        tour.say(
            "add mac-token as whenUnlockedThisDeviceOnly, without kSecUseDataProtectionKeychain: it lands in the "
                + "\(added.items.first?.macKeychain?.rawValue ?? "data-protection") keychain, its accessibility dropped")
        func read(_ account: String, dataProtection: Bool?) async throws {
            let query = ItemQuery(.genericPassword, attributes: [.account: .string(account)], returning: .data, useDataProtectionKeychain: dataProtection)
            let _: NodeAPI.Items = try await mac.call(.copy, NodeAPI.Search(app: Self.mail, query: query))
        }
        await tour.attempt("read mac-token with kSecUseDataProtectionKeychain, as the iOS code path does") { try await read("mac-token", dataProtection: true) }
        token.useDataProtectionKeychain = true
        await tour.attempt("add mac-token again with kSecUseDataProtectionKeychain") { try await mac.add(Self.mail, token) }
        try await mac.send(.lock, NodeAPI.Lock(immediately: true))
        await tour.attempt("with the Mac locked, read mac-token from the file-based keychain") { try await read("mac-token", dataProtection: false) }
        await tour.attempt("with the Mac locked, read mac-token from the data protection keychain") { try await read("mac-token", dataProtection: true) }
        let cleanup = ItemQuery(.genericPassword, attributes: [.account: .string("mac-token")])
        let deleted: NodeAPI.Changed = try await mac.call(.delete, NodeAPI.Search(app: Self.mail, query: cleanup))
        tour.say("a cleanup without kSecUseDataProtectionKeychain deletes mac-token: \(deleted.count.items), one from each keychain")
        if let passcode = member.passcode { try await mac.send(.unlock, NodeAPI.Unlock(passcode: passcode)) }
    }

    /// A member of the circle powers off and on while the phone writes: before its first unlock
    /// its sync stays sealed; unlocked, it catches up.
    private func restart(_ member: FleetFile.Member, phone: NodeClient, runner: FleetRunner, tour: Tour) async throws {
        tour.heading("\(member.deviceName) powers off and on while the phone writes")
        let directory = runner.directory(of: member)
        let client = NodeClient(directory: directory)
        try await NodeLauncher.stop(directory: directory)
        _ = try await NodeLauncher.start(directory: directory)
        await tour.attempt("the phone adds calendar-token (afterFirstUnlock, synchronizable)") {
            try await phone.add(
                Self.mail,
                NewItem(
                    .genericPassword, attributes: [.account: .string("calendar-token")], data: Data("calendar-secret".utf8),
                    protection: .afterFirstUnlock, synchronizable: true))
            let _: SyncReport = try await phone.call(.syncNow, NodeAPI.SyncNow())
        }
        let sealed: NodeAPI.CircleStatus = try await client.get(.circleStatus)
        tour.say("before first unlock, \(member.deviceName) is still one of \(sealed.members.count) members; its sync keys stay sealed")
        await tour.attempt("on \(member.deviceName), sync now") { let _: SyncReport = try await client.call(.syncNow, NodeAPI.SyncNow()) }
        try await client.send(.unlock, NodeAPI.Unlock(passcode: member.passcode))
        let _: SyncReport = try await client.call(.syncNow, NodeAPI.SyncNow())
        await tour.attempt("unlocked and synced, mail on \(member.deviceName) reads calendar-token") {
            try await client.read(Self.mail, "calendar-token", synchronizable: .yes)
        }
    }

    /// Backs the phone up both ways and restores each archive onto a new iPhone.
    private func newPhone(from phone: NodeClient, at phoneDirectory: URL, runner: FleetRunner, tour: Tour) async throws {
        tour.heading("Alice gets a new iPhone: her backups, restored onto it")
        let backupPassword = "demo backup password"
        for (kind, password) in [("encrypted", Optional(backupPassword)), ("unencrypted", nil)] {
            let archive = runner.root.appendingPathComponent("phone-\(kind).kfbackup")
            let manifest: ArchiveManifest = try await phone.call(.backup, NodeAPI.Backup(path: archive.path, password: password))
            tour.say("\(kind) backup of the phone: \(manifest.summary)")
            if password == nil {
                // Only the phone's hardware UID keys its digests: elsewhere they prove nothing.
                let reader = try ArchiveReader(contentsOf: archive)
                let keys = try Device.backupKeys(at: phoneDirectory)
                try reader.read(password: nil, device: keys)
                tour.say(
                    "verified by the phone that wrote it: authenticity \(reader.authenticity(device: keys).rawValue); elsewhere \(reader.authenticity(device: nil).rawValue) only, which detect damage, not forgery"
                )
            }
            let target = runner.root.appendingPathComponent("new-phone-\(kind)")
            try Device.initialize(at: target, options: DeviceOptions(name: "Alice's new iPhone", passcode: "654321"))
            if password == nil {
                // Anyone could have written an unencrypted archive of another device: refused, untouched.
                await tour.attempt("restore it onto the new iPhone as it is") {
                    _ = try DeviceRestore.restore(archive, password: nil, to: target, passcode: "654321")
                }
                tour.say(
                    "refused before the new iPhone is touched: its apps and files could be anyone's; the demo wrote it, so it says so (--accept-unauthenticated)"
                )
            }
            let report = try DeviceRestore.restore(
                archive, password: password.map { Data($0.utf8) }, to: target, passcode: "654321", acceptingUnauthenticated: password == nil)
            tour.say(
                "restored onto a new iPhone: \(report.restoredCount) of \(report.items.count) keychain items, \(report.sandboxFiles) sandbox file\(report.sandboxFiles == 1 ? "" : "s")"
            )
            for line in report.table(target: target.path).split(separator: "\n").dropFirst() { tour.say(String(line)) }
        }
        try await phoneBackup(from: phoneDirectory, runner: runner, tour: tour, password: backupPassword)
    }

    /// The phone as a real iPhone's encrypted backup (a Finder folder), opened by a tool made
    /// for real phones' backups when scripts/ios-readers installed it, and restored onto a new
    /// iPhone.
    private func phoneBackup(from phone: URL, runner: FleetRunner, tour: Tour, password: String) async throws {
        tour.heading("The same phone as a real iPhone backup (`keyferry backup create --format ios`), as Finder writes one")
        let staging = runner.root.appendingPathComponent("ios-backup")
        let summary: PhoneBackupWriter.Summary = try await NodeClient(directory: phone, timeout: .seconds(600)).call(
            .phoneBackup, NodeAPI.PhoneBackup(path: staging.path, password: password, rounds: nil))
        // Finder keeps a backup in a folder named by the phone's UDID; some readers expect it.
        let backups = runner.root.appendingPathComponent("MobileSync")
        let folder = backups.appendingPathComponent(summary.udid)
        try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: staging, to: folder)
        tour.say(
            "wrote \(summary.udid): Manifest.plist, an encrypted Manifest.db, \(summary.files) app files and keychain-backup.plist with "
                + "\(summary.keychainItems) items, under 10,000,000 rounds of PBKDF2")
        for (name, count) in summary.leftOut.sorted(by: { $0.key < $1.key }) {
            tour.say("left out, as a phone leaves them: \(count) \(name.replacingOccurrences(of: ".", with: " ")) item\(count == 1 ? "" : "s")")
        }
        let survey = try PhoneBackupSurvey(folder: folder)
        tour.say(
            "backup inspect, with no password: \(survey.generation?.rawValue ?? "unknown") layout, \(survey.applications.count) apps, "
                + (survey.missing.isEmpty ? "nothing missing" : "missing \(survey.missing.joined(separator: ", "))"))
        let python = URL(fileURLWithPath: ".build/ios-readers/tools/bin/python")
        if FileManager.default.isExecutableFile(atPath: python.path) {
            let opened = try await BlockingPool.shared.run { _ in try Self.openWithIphoneBackupDecrypt(python, folder: folder, password: password) }
            tour.say("iphone-backup-decrypt (a tool for real iPhones' backups) opens it: \(opened)")
        } else {
            tour.say("(scripts/ios-readers installs iphone-backup-decrypt, mvt and others, which open this folder as a phone's)")
        }
        let target = runner.root.appendingPathComponent("new-phone-ios")
        try Device.initialize(at: target, options: DeviceOptions(name: "Alice's new iPhone", passcode: "654321"))
        let report = try await BlockingPool.shared.run { _ in
            try PhoneRestore.restore(folder, password: Data(password.utf8), to: target, passcode: "654321")
        }
        tour.say(
            "restored onto a new iPhone: \(report.restoredCount) of \(report.items.count) keychain items, \(report.apps.count) apps, \(report.sandboxFiles) files"
        )
        for line in report.table(target: target.path).split(separator: "\n").dropFirst() { tour.say(String(line)) }
    }

    /// What iphone-backup-decrypt reads of the backup: its files, and the mail app's UserDefaults.
    private static func openWithIphoneBackupDecrypt(_ python: URL, folder: URL, password: String) throws -> String {
        let script = """
            import sys, plistlib
            from iphone_backup_decrypt import EncryptedBackup
            backup = EncryptedBackup(backup_directory=sys.argv[1], passphrase=sys.argv[2])
            backup.test_decryption()
            with backup.manifest_db_cursor() as cursor:
                cursor.execute("SELECT COUNT(*) FROM Files WHERE flags = 1")
                files = cursor.fetchone()[0]
            defaults = plistlib.loads(backup.extract_file_as_bytes("Library/Preferences/\(mail).plist", domain_like="AppDomain-\(mail)"))
            print(f"{files} files decrypted with the password; the mail app's UserDefaults say signedInUser = {defaults.get('signedInUser')}")
            """
        let process = Process()
        process.executableURL = python
        process.arguments = ["-c", script, folder.path, password]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try? output.fileHandleForReading.close()
        guard process.terminationStatus == 0 else { return "it could not (exit \(process.terminationStatus))" }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static let mail = "com.example.mail"
    static let widget = "com.example.mail.widget"
    static let bank = "com.bank.wallet"
}

/// Prints the demo's story: headings, sentences and the outcome of each call.
extension DemoCommand {
    /// `keyferry lint` on the mail app's next version, before it ever runs: the traps the audit
    /// would record, found in the source. It waits for keyferry-lint: a thread of its own.
    func lintNextVersion(in root: URL, tour: Tour) throws {
        tour.heading("Its next version, before it runs: `keyferry lint` finds the same traps in the source")
        let source = root.appendingPathComponent("MailSettings.swift")
        try Data(DemoAppCode.nextVersionSource.utf8).write(to: source)
        let findings: [LintFinding]
        do {
            findings = try LintCommand.findings(in: [source.path])
        } catch let failure as CommandFailure where failure.kind == .unavailable {
            tour.say("(skipped: \(failure.description))")
            return
        }
        for finding in findings {
            tour.say("MailSettings.swift:\(finding.line): \(finding.rule.title) [\(finding.rule.name)]")
        }
    }
}

struct Tour {
    func heading(_ text: String) { print("\n== \(text)") }
    func say(_ text: String) { print("   \(text)") }

    func attempt(_ label: String, _ body: () async throws -> Void) async {
        let outcome: String
        do {
            try await body()
            outcome = "ok"
        } catch let error as KeychainError {
            outcome = error.status.description
        } catch {
            outcome = "\(error)"
        }
        print("   \(label.count < 72 ? label.padded(72) : label + "  ")\(outcome)")
    }
}

extension NodeClient {
    func add(_ app: String, _ item: NewItem) async throws {
        let _: NodeAPI.Items = try await call(.add, NodeAPI.Add(app: app, item: item))
    }

    /// Reads a generic password's data by account, as `app`.
    func read(
        _ app: String, _ account: String, _ authentication: AuthenticationContext = .noInteraction,
        synchronizable: SynchronizableMatch = .no
    ) async throws {
        let query = ItemQuery(
            .genericPassword, attributes: [.account: .string(account)], synchronizable: synchronizable,
            returning: .data, authentication: authentication)
        let _: NodeAPI.Items = try await call(.copy, NodeAPI.Search(app: app, query: query))
    }
}

extension NewItem {
    static func generic(_ account: String, protection: ProtectionClass) -> NewItem {
        NewItem(.genericPassword, attributes: [.account: .string(account)], data: Data("\(account)-secret".utf8), protection: protection)
    }

    var protectionName: String {
        let protection = accessControl?.protection ?? self.protection ?? itemClass.defaultProtection
        var text = protection.name
        if let accessControl, accessControl.requiresAuthentication { text += " + \(accessControl.expression)" }
        if synchronizable { text += ", synchronizable" }
        return text
    }
}
