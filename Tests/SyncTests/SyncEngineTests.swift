import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import KeyferryThreads
import Relay
import Testing

@testable import Sync
@testable import SyncWire

/// A relay held in memory: logs per circle and stream, each record once, as `RelayStorage`
/// keeps them.
final class MemoryRelay: RelayTransport {
    private let logs = Locked<[String: [[UInt8]]]>([:])
    /// A real relay that serves the pulls, compacting as it takes pushes; `logs` still keeps
    /// every version pushed, for the model.
    let compacting: LocalRelay?

    init(compactingIn directory: URL? = nil, now: @escaping @Sendable () -> Date = Date.init) {
        compacting = directory.map { LocalRelay(storage: try! SQLiteRelayStorage(directory: $0), now: now) }
    }

    func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws {
        try await compacting?.acknowledge(circle: circle, through: cursor, proof: proof)
    }

    func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] {
        try await compacting?.forgottenDeletions(circle: circle, after: item, limit: limit) ?? []
    }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof? = nil) async throws -> Int {
        let kept = try await compacting?.push(bodies, circle: circle, stream: stream, proof: proof)
        let new = logs.withLock { logs in
            let key = "\(circle)/\(stream)"
            let new = bodies.filter { !(logs[key] ?? []).contains($0) }
            logs[key, default: []] += new
            return new.count
        }
        return kept ?? new
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        if let compacting { return try await compacting.pull(circle: circle, stream: stream, after: cursor, limit: limit) }
        return logs.withLock { logs in
            let log = logs["\(circle)/\(stream)"] ?? []
            return log.enumerated().dropFirst(Int(cursor)).prefix(limit).map { RelayRecord(cursor: UInt64($0.offset + 1), body: $0.element) }
        }
    }

    /// Every record of every log, for looking for plaintext.
    var everything: [UInt8] { logs.withLock { $0.values.flatMap { $0.flatMap { $0 } } } }

    func records(_ circle: UUID, _ stream: RelayStream) -> [[UInt8]] { logs.withLock { $0["\(circle)/\(stream)"] ?? [] } }

    /// What a hostile relay can do: serve a record again, after newer ones.
    func replay(_ body: [UInt8], _ circle: UUID, _ stream: RelayStream) { logs.withLock { $0["\(circle)/\(stream)", default: []].append(body) } }
}

/// A relay seen through a slow link: while `lagging`, membership pulls return nothing new, as
/// if another member's change had not reached this one yet. The next pull sees everything.
final class LaggingRelay: RelayTransport {
    let relay: MemoryRelay
    let lagging = Locked(false)

    init(_ relay: MemoryRelay) { self.relay = relay }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        try await relay.push(bodies, circle: circle, stream: stream, proof: proof)
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        if stream == .membership,
            lagging.withLock({ was in
                defer { was = false }
                return was
            })
        {
            return []
        }
        return try await relay.pull(circle: circle, stream: stream, after: cursor, limit: limit)
    }
}

/// A member: a test device and its engine.
struct Member {
    let name: String
    let fixture: TestDevice
    var engine: SyncEngine!
    static let relayURL = URL(string: "http://relay.invalid")!

    /// `clockSkew` seconds: how far this device's clock runs ahead (or behind, negative).
    init(_ name: String, seed: UInt64, clockSkew: TimeInterval = 0) throws {
        self.name = name
        fixture = try TestDevice(seed: seed, clock: ManualClock(ManualClock().now().addingTimeInterval(clockSkew)))
    }

    var keychain: Keychain { get throws { try fixture.keychain() } }

    /// What this member holds that replicates: uuid, attributes and data of live items.
    func synchronizedItems() throws -> [UUID: String] {
        var items: [UUID: String] = [:]
        for change in try fixture.device.deviceKeychain.changes(since: 0, includingData: true)
        where SyncEligibility(change.record) == .replicates && !change.isTombstone {
            let r = change.record
            items[r.uuid] =
                "\(r.accessGroup)|\(r.protection.name)|\(r.attributes.sorted { $0.key < $1.key })|\(String(decoding: r.data ?? Data(), as: UTF8.self))"
        }
        return items
    }

    func localItems() throws -> Set<UUID> {
        Set(try fixture.device.deviceKeychain.changes(since: 0).filter { !$0.record.synchronizable }.map(\.record.uuid))
    }
}

/// Three members of one circle on an in-memory relay: phone creates it and vouches for the
/// others. The laptop's clock runs `laptopSkew` seconds behind.
func circleOfThree(_ relay: MemoryRelay, laptopSkew: TimeInterval = 0) async throws -> [Member] {
    var phone = try Member("phone", seed: 1)
    var tablet = try Member("tablet", seed: 2)
    var laptop = try Member("laptop", seed: 3, clockSkew: -laptopSkew)
    phone.engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: relay)
    tablet.engine = try await join(tablet, sponsor: phone, relay)
    laptop.engine = try await join(laptop, sponsor: phone, relay)
    return [phone, tablet, laptop]
}

/// `joiner` joins the circle of `sponsor`, which vouches for it.
func join(_ joiner: Member, sponsor: Member, _ relay: any RelayTransport) async throws -> SyncEngine {
    let voucher = try await sponsor.engine.vouch(for: SyncEngine.peerIdentity(of: joiner.fixture.device, name: joiner.name))
    return try await SyncEngine.join(voucher, device: joiner.fixture.device, transport: relay)
}

/// Sync passes over every member until a whole round moves nothing.
@discardableResult
func settle(_ members: [Member]) async throws -> [SyncReport] {
    var reports: [SyncReport] = []
    for _ in 0..<5 {
        var moved = false
        for member in members {
            let report = try await member.engine.sync()
            reports.append(report)
            moved = moved || report.pushed > 0 || report.applied > 0
        }
        if !moved { return reports }
    }
    Issue.record("sync did not settle in 5 rounds")
    return reports
}

@Suite("Sync engine")
struct SyncEngineTests {
    @Test("a synced version never replaces a ThisDeviceOnly item that holds its primary key; the report counts it")
    func deviceBoundItemsStay() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        _ = try phone.keychain.add(.password(account: "token", value: "phone's own", protection: .afterFirstUnlockThisDeviceOnly, synchronizable: true))
        _ = try tablet.keychain.add(.password(account: "token", value: "tablet's", protection: .afterFirstUnlock, synchronizable: true))
        let reports = try await settle(members)
        let kept = try #require(try phone.keychain.copy(.password(account: "token", synchronizable: .yes)).first)
        #expect(kept.data == Data("phone's own".utf8))
        #expect(kept.protection == .afterFirstUnlockThisDeviceOnly)
        #expect(reports.map(\.keptDeviceBound).reduce(0, +) >= 1)
        #expect(try members[2].keychain.copy(.password(account: "token", synchronizable: .yes)).first?.data == Data("tablet's".utf8))
    }

    @Test("adds, updates, renames and deletes on different members leave all three with the same synchronizable items, and none with another's local ones")
    func converges() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        for (member, protection) in [(phone, ProtectionClass.whenUnlocked), (tablet, .afterFirstUnlock), (laptop, .always)] {
            _ = try member.keychain.add(
                .password(account: "\(member.name)-shared", value: "MARKER-\(member.name)", protection: protection, synchronizable: true))
            _ = try member.keychain.add(.password(account: "\(member.name)-local", protection: protection))
            _ = try member.keychain.add(.password(account: "\(member.name)-bound", protection: .afterFirstUnlockThisDeviceOnly, synchronizable: true))
        }
        let first = try await settle(members)
        #expect(first.contains { $0.skippedDeviceBound > 0 })
        #expect(try members.allSatisfy { try $0.synchronizedItems().count == 3 })

        try tablet.keychain.update(.password(account: "phone-shared", synchronizable: .yes), with: ItemChanges(data: Data("edited on tablet".utf8)))
        try laptop.keychain.update(
            .password(account: "tablet-shared", synchronizable: .yes), with: ItemChanges(attributes: [.account: .string("tablet-renamed")]))
        try phone.keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("laptop-shared")], synchronizable: .yes))
        try await settle(members)

        let reference = try phone.synchronizedItems()
        #expect(reference.count == 2)
        #expect(reference.values.contains { $0.contains("edited on tablet") })
        #expect(reference.values.contains { $0.contains("tablet-renamed") })
        #expect(!reference.values.contains { $0.contains("laptop-shared") })
        for member in members {
            #expect(try member.synchronizedItems() == reference, "\(member.name) differs")
            let others = members.filter { $0.name != member.name }
            for other in others { #expect(try member.localItems().isDisjoint(with: other.localItems())) }
            #expect(try member.keychain.copy(.password(account: "\(member.name)-local")).count == 1)
        }
        for marker in ["MARKER-phone", "MARKER-tablet", "phone-shared", "tablet-renamed"] {
            #expect(relay.everything.firstRange(of: Array(marker.utf8)) == nil, "\(marker) readable at the relay")
        }
    }

    @Test("concurrent edits of one item resolve the same way on every member, even with a clock an hour behind")
    func concurrentEdits() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay, laptopSkew: 3_600)
        _ = try members[0].keychain.add(.password(account: "contested", synchronizable: true))
        try await settle(members)
        for (index, member) in members.enumerated() {
            try member.keychain.update(.password(account: "contested", synchronizable: .yes), with: ItemChanges(data: Data("edit \(index)".utf8)))
        }
        try await settle(members)
        let reference = try members[0].synchronizedItems()
        #expect(reference.count == 1)
        for member in members { #expect(try member.synchronizedItems() == reference) }

        // The laptop has seen every edit; its next one is newer, though its clock says an hour ago.
        try members[2].keychain.update(.password(account: "contested", synchronizable: .yes), with: ItemChanges(data: Data("after seeing".utf8)))
        try await settle(members)
        for member in members {
            #expect(try member.keychain.copy(.password(account: "contested", synchronizable: .yes)).first?.data == Data("after seeing".utf8))
        }
    }

    @Test("a class A item that arrives while the receiver is locked waits, sealed, and appears at unlock")
    func classAWhileLocked() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        try tablet.fixture.device.lock(immediately: true)
        _ = try phone.keychain.add(.password(account: "for-later", protection: .whenUnlocked, synchronizable: true))
        _ = try await phone.engine.sync()
        let locked = try await tablet.engine.sync()
        #expect(locked.waitingForUnlock == 1 && locked.applied == 0)
        try tablet.fixture.device.unlock(passcode: TestDevice.defaultPasscode)
        let unlocked = try await tablet.engine.sync()
        #expect(unlocked.applied == 1)
        #expect(try tablet.keychain.copy(.password(account: "for-later", synchronizable: .yes)).first?.data == Data("secret".utf8))
    }

    @Test("an iOS Simulator has no iCloud Keychain: it can neither create nor join a circle, and nothing is written")
    func simulatorHasNoICloudKeychain() async throws {
        let relay = MemoryRelay()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let simulator = try Device.create(
            at: directory, options: DeviceOptions(name: "Sim", passcodeHashing: .minimum, profile: .simulator), clock: ManualClock())
        defer { simulator.powerOff() }
        let refusal = await #expect(throws: CircleError.self) {
            try await SyncEngine.create(device: simulator, name: "sim", relay: Member.relayURL, transport: relay)
        }
        #expect(refusal?.code == .noICloudKeychain)
        let phone = try Member("phone", seed: 1)
        let engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: relay)
        let voucher = try await engine.vouch(for: SyncEngine.peerIdentity(of: simulator, name: "sim"))
        await #expect(throws: CircleError.self) { try await SyncEngine.join(voucher, device: simulator, transport: relay) }
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("sync.json").path))
    }

    @Test("a device no member vouched for cannot join, and envelopes from outside the circle are refused")
    func outsiders() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let stranger = try Member("stranger", seed: 9)
        let circle = await members[0].engine.circle
        // The stranger vouches for itself, with keys of its own making.
        let own = try SyncSecrets.identity(of: stranger.fixture.device)
        let history = try CircleHistory.reading(relay.records(circle, .membership), circle: circle).history
        let keys = CircleKeys(circle: circle, epoch: 1)
        let selfMade = Voucher(
            circle: circle, relay: Member.relayURL, head: ContentDigest.of(history.entries.last!.bytes), request: nil,
            entry: MembershipEntry(.join, subject: own.peer(named: "stranger"), after: history, signer: own.signingKey),
            shares: [CircleKeyShare(keys, to: own.sealingKey.publicKey, from: own.signingKey)], sponsor: own.signingKey)
        let membershipBefore = relay.records(circle, .membership)
        let refusal = await #expect(throws: CircleError.self) {
            try await SyncEngine.join(selfMade, device: stranger.fixture.device, transport: relay)
        }
        #expect(refusal?.code == .forged && "\(refusal!)".contains("sponsor is not a member"))
        #expect(relay.records(circle, .membership) == membershipBefore)
        #expect(!FileManager.default.fileExists(atPath: stranger.fixture.device.directory.appendingPathComponent("sync.json").path))
        let record = ItemRecord(
            itemClass: .genericPassword, uuid: UUID(), accessGroup: "\(TestDevice.teamID).\(TestDevice.appID)",
            protection: .afterFirstUnlock, synchronizable: true, accessControl: nil, creationDate: Date(),
            modificationDate: Date(), attributes: [.account: .string("forged")], data: Data("x".utf8))
        let outsider = SigningKey(seed: SymmetricKey())  // a device outside the circle
        let forged = try SealedEnvelope.seal(
            SyncedItem(version: HybridTimestamp(milliseconds: .max / 2), isTombstone: false, record: record),
            keys: keys, author: outsider.publicKey)
        try await relay.push([EnvelopeBatch([forged], circle: circle, author: outsider).bytes], circle: circle, stream: .envelopes)
        let report = try await members[1].engine.sync()
        #expect(report.rejectedCount == 1 && report.rejected.first?.reason == .notAMember && report.applied == 0)
        #expect(throws: KeychainError.self) { try members[1].keychain.copy(.password(account: "forged", synchronizable: .yes)) }
    }

    @Test("a member picks up where it left off after a restart: its identity and keys from the keychain, the rest from sync.json")
    func restart() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        _ = try members[0].keychain.add(.password(account: "before", synchronizable: true))
        try await settle(members)
        let tablet = members[1].fixture.device
        // An idle pass leaves the saved state alone; one that moves rewrites it.
        let state = tablet.directory.appendingPathComponent("sync.json").path
        let long = Date(timeIntervalSinceReferenceDate: 0)
        try FileManager.default.setAttributes([.modificationDate: long], ofItemAtPath: state)
        let modified = { try FileManager.default.attributesOfItem(atPath: state)[.modificationDate] as? Date }
        _ = try await members[1].engine.sync()
        #expect(try modified() == long)
        let before = try await SyncEngine.peerIdentity(of: tablet, name: "tablet")
        members[1].engine = try #require(try await SyncEngine.open(device: tablet, transport: { _ in relay }))
        #expect(try await SyncEngine.peerIdentity(of: tablet, name: "tablet") == before)
        #expect(await members[1].engine.circle == members[0].engine.circle)

        _ = try members[0].keychain.add(.password(account: "after", synchronizable: true))
        _ = try members[1].keychain.add(.password(account: "from-restarted", synchronizable: true))
        let reports = try await settle(members)
        #expect(reports.allSatisfy { $0.rejected.isEmpty })
        #expect(try modified() != long)
        let reference = try members[0].synchronizedItems()
        #expect(reference.count == 3)
        for member in members { #expect(try member.synchronizedItems() == reference) }
        #expect(try await SyncEngine.open(device: members[0].fixture.device, transport: { _ in relay }) != nil)
        await #expect(throws: CircleError.self) {
            try await SyncEngine.create(device: tablet, name: "again", relay: Member.relayURL, transport: relay)
        }
    }

    @Test("a removed member gets no share of the new keys, everything written after is sealed under them, and it stops syncing")
    func removal() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        _ = try phone.keychain.add(.password(account: "before", synchronizable: true))
        try await settle(members)
        let circle = await phone.engine.circle
        let batchesBefore = relay.records(circle, .envelopes).count

        try await phone.engine.remove("laptop")
        #expect(await phone.engine.epoch == 2)
        await #expect(throws: CircleError.self) { try await phone.engine.remove("nobody") }
        _ = try phone.keychain.add(.password(account: "after", synchronizable: true))
        try await settle([phone, tablet])
        #expect(try tablet.keychain.copy(.password(account: "after", synchronizable: .yes)).first?.data == Data("secret".utf8))
        await #expect(throws: CircleError.self) { try await laptop.engine.sync() }
        #expect(throws: KeychainError.self) { try laptop.keychain.copy(.password(account: "after", synchronizable: .yes)) }

        let after = relay.records(circle, .envelopes).dropFirst(batchesBefore).flatMap { try! EnvelopeBatch(bytes: $0).envelopes }
        #expect(!after.isEmpty && after.allSatisfy { $0.header.epoch == 2 })
        let laptopKey = try await SyncEngine.peerIdentity(of: laptop.fixture.device, name: "laptop").sealing
        let sharesOfTwo = relay.records(circle, .keys).compactMap { try? KeyRecord(bytes: $0) }.compactMap { record -> CircleKeyShare? in
            if case .share(let share) = record, share.epoch == 2 { share } else { nil }
        }
        #expect(sharesOfTwo.count == 2 && !sharesOfTwo.contains { $0.recipient == laptopKey })
    }

    @Test("a member powered on before first unlock starts sealed, answers for its circle, and syncs both ways once unlocked")
    func sealedUntilFirstUnlock() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        _ = try members[0].keychain.add(.password(account: "before", protection: .afterFirstUnlock, synchronizable: true))
        try await settle(members)
        let tablet = members[1].fixture.device
        let key = await members[1].engine.signingKey
        try tablet.reboot()
        #expect(tablet.lockState == .beforeFirstUnlock)
        // A reboot seals the running member too: what it had unsealed leaves memory.
        await members[1].engine.seal()
        await #expect(throws: KeychainError.self) { try await members[1].engine.sync() }
        // The phone, rebooted and unlocked, vouches at once: unsealing reopens its keys too.
        try members[0].fixture.device.reboot()
        await members[0].engine.seal()
        try members[0].fixture.device.unlock(passcode: TestDevice.defaultPasscode)
        let newcomer = try Member("newcomer", seed: 5)
        _ = try await members[0].engine.vouch(for: SyncEngine.peerIdentity(of: newcomer.fixture.device, name: "newcomer"))
        // And a member opened anew from disk starts sealed.
        members[1].engine = try #require(try await SyncEngine.open(device: tablet, transport: { _ in relay }))
        #expect(await members[1].engine.circle == members[0].engine.circle)
        #expect(await members[1].engine.signingKey == key, "its key is known while its identity is sealed")
        #expect(await members[1].engine.members.count == 3)
        let sealed = await #expect(throws: KeychainError.self) { try await members[1].engine.sync() }
        #expect(sealed?.status == .interactionNotAllowed)
        #expect(sealed?.message.contains("has not been unlocked since it was powered on") == true)
        #expect(sealed?.message.contains("unlock it") == true, "it names the fix")

        _ = try members[0].keychain.add(.password(account: "while-sealed", synchronizable: true))
        try tablet.unlock(passcode: TestDevice.defaultPasscode)
        _ = try members[1].keychain.add(.password(account: "from-tablet", synchronizable: true))
        try await settle(members)
        let reference = try members[0].synchronizedItems()
        #expect(reference.count == 3)
        for member in members { #expect(try member.synchronizedItems() == reference, "\(member.name)") }
    }

    @Test(
        "a locked member with a class A change still pushes and applies class C; the class A change goes at unlock (pushes read the feed a page at a time)",
        arguments: [10_000, 1])
    func lockedMemberSyncsWhatItCan(pushPage: Int) async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        await phone.engine.setPushPage(pushPage)
        _ = try phone.keychain.add(.password(account: "class-a", protection: .whenUnlocked, synchronizable: true))
        try await settle(members)
        try phone.keychain.update(.password(account: "class-a", synchronizable: .yes), with: ItemChanges(data: Data("edited before the lock".utf8)))
        _ = try phone.keychain.add(.password(account: "phone-class-c", protection: .afterFirstUnlock, synchronizable: true))
        try phone.fixture.device.lock(immediately: true)
        _ = try tablet.keychain.add(.password(account: "tablet-class-c", protection: .afterFirstUnlock, synchronizable: true))
        _ = try await tablet.engine.sync()

        let locked = try await phone.engine.sync()
        #expect(locked.pushed == 1 && locked.waitingToPush == 1 && locked.applied == 1)
        #expect(try phone.keychain.copy(.password(account: "tablet-class-c", synchronizable: .yes)).first?.data == Data("secret".utf8))
        _ = try await tablet.engine.sync()
        #expect(try tablet.keychain.copy(.password(account: "phone-class-c", synchronizable: .yes)).count == 1)
        #expect(try tablet.keychain.copy(.password(account: "class-a", synchronizable: .yes)).first?.data == Data("secret".utf8))
        let again = try await phone.engine.sync()
        #expect(again.pushed == 0 && again.waitingToPush == 1, "the waiting change is not pushed twice, nor forgotten")

        try phone.fixture.device.unlock(passcode: TestDevice.defaultPasscode)
        let unlocked = try await phone.engine.sync()
        #expect(unlocked.pushed == 1 && unlocked.waitingToPush == 0)
        try await settle(members)
        for member in members {
            #expect(try member.keychain.copy(.password(account: "class-a", synchronizable: .yes)).first?.data == Data("edited before the lock".utf8))
        }
    }

    @Test("an edit made before a lock and uploaded after unlock loses to a later edit made elsewhere meanwhile")
    func laterEditWins() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, laptop) = (members[0], members[2])
        let query = ItemQuery.password(account: "contested", synchronizable: .yes)
        _ = try phone.keychain.add(.password(account: "contested", protection: .whenUnlocked, synchronizable: true))
        try await settle(members)

        try phone.keychain.update(query, with: ItemChanges(data: Data("phone, earlier".utf8)))
        try phone.fixture.device.lock(immediately: true)
        #expect(try await phone.engine.sync().waitingToPush == 1)
        for member in members { member.fixture.clock.advance(by: 1) }
        try laptop.keychain.update(query, with: ItemChanges(data: Data("laptop, a second later".utf8)))
        #expect(try await laptop.engine.sync().pushed == 1)
        for member in members { member.fixture.clock.advance(by: 5) }
        try phone.fixture.device.unlock(passcode: TestDevice.defaultPasscode)
        try await settle(members)
        for member in members {
            #expect(try member.keychain.copy(query).first?.data == Data("laptop, a second later".utf8), "\(member.name)")
        }
    }

    @Test("making an item local deletes it on the other members; the member that made it local keeps its copy")
    func madeLocal() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let phone = members[0]
        _ = try phone.keychain.add(.password(account: "going-local", value: "kept here", protection: .afterFirstUnlock, synchronizable: true))
        try await settle(members)
        #expect(try members.allSatisfy { try $0.synchronizedItems().count == 1 })

        try phone.keychain.update(.password(account: "going-local", synchronizable: .yes), with: ItemChanges(synchronizable: false))
        try await settle(members)
        for member in members {
            #expect(try member.synchronizedItems().isEmpty, "\(member.name)")
            #expect(throws: KeychainError.self) { try member.keychain.copy(.password(account: "going-local", synchronizable: .yes)) }
        }
        for member in members.dropFirst() {
            #expect(throws: KeychainError.self) { try member.keychain.copy(.password(account: "going-local", synchronizable: .any)) }
        }
        #expect(try phone.keychain.copy(.password(account: "going-local")).first?.data == Data("kept here".utf8))
    }

    @Test("a device in a circle, or removed from one, is refused a join with nothing published; after leaving it can be vouched for again")
    func refusedJoinChangesNothing() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        let circle = await phone.engine.circle
        _ = try phone.keychain.add(.password(account: "before-removal", synchronizable: true))
        try await settle(members)
        let received = Array(try laptop.synchronizedItems().keys)
        #expect(try laptop.fixture.device.deviceKeychain.replicaVersions(of: received).count == 1)
        try await phone.engine.remove("laptop")
        try await settle([phone, tablet])

        let membership = relay.records(circle, .membership)
        let refusal = await #expect(throws: CircleError.self) { try await join(laptop, sponsor: phone, relay) }
        #expect("\(refusal!)".contains("already in a circle"))
        #expect(relay.records(circle, .membership) == membership)
        #expect(await phone.engine.members.map(\.name) == ["phone", "tablet"])
        _ = try phone.keychain.add(.password(account: "after-removal", synchronizable: true))
        try await settle([phone, tablet])
        await #expect(throws: CircleError.self) { try await laptop.engine.sync() }
        #expect(throws: KeychainError.self) { try laptop.keychain.copy(.password(account: "after-removal", synchronizable: .yes)) }

        // Removed, it leaves: it forgets the circle and the versions it held (the items stay),
        // and a member may vouch for it again.
        try await laptop.engine.leave(force: false)
        #expect(!FileManager.default.fileExists(atPath: laptop.fixture.device.directory.appendingPathComponent("sync.json").path))
        #expect(try laptop.fixture.device.deviceKeychain.replicaVersions(of: received).isEmpty)
        #expect(try laptop.keychain.copy(.password(account: "before-removal", synchronizable: .yes)).count == 1)
        #expect(try await SyncEngine.open(device: laptop.fixture.device, transport: { _ in relay }) == nil)
        var back = laptop
        back.engine = try await join(laptop, sponsor: phone, relay)
        try await settle([phone, tablet, back])
        #expect(try laptop.keychain.copy(.password(account: "after-removal", synchronizable: .yes)).count == 1)
    }

    @Test("a member cannot remove itself; it leaves, with new keys for those who stay, which it no longer holds")
    func leaving() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        let circle = await phone.engine.circle
        let selfRemoval = await #expect(throws: CircleError.self) { try await tablet.engine.remove("tablet") }
        #expect("\(selfRemoval!)".contains("is this device; to take it out of the circle, `circle leave` it"))
        #expect(await tablet.engine.epoch == 1)

        try await tablet.engine.leave(force: false)
        #expect(!FileManager.default.fileExists(atPath: tablet.fixture.device.directory.appendingPathComponent("sync.json").path))
        #expect(try SyncSecrets.circleKey(tablet.fixture.device, circle: circle, epoch: 1) == nil)
        #expect(try SyncSecrets.circleKey(tablet.fixture.device, circle: circle, epoch: 2) == nil)
        _ = try phone.keychain.add(.password(account: "after-leaving", synchronizable: true))
        try await settle([phone, laptop])
        #expect(await phone.engine.members.map(\.name) == ["laptop", "phone"])
        #expect(await laptop.engine.epoch == 2)
        #expect(try laptop.keychain.copy(.password(account: "after-leaving", synchronizable: .yes)).count == 1)
        #expect(throws: KeychainError.self) { try tablet.keychain.copy(.password(account: "after-leaving", synchronizable: .yes)) }
    }

    @Test("a member is removed by name, or by the start of its key when two share a name; an ambiguous or unknown one is refused with nothing changed")
    func removalByKey() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let other = try Member("phone", seed: 4)
        let otherPeer = try await SyncEngine.peerIdentity(of: other.fixture.device, name: "phone")
        _ = try await join(other, sponsor: members[0], relay)
        let otherKey = Hex.encode(otherPeer.signing.bytes)
        let engine = members[1].engine!

        let ambiguous = await #expect(throws: CircleError.self) { try await engine.remove("phone") }
        #expect("\(ambiguous!)".contains("2 members match phone: phone ("))
        let unknown = await #expect(throws: CircleError.self) { try await engine.remove("deadbeef") }
        #expect("\(unknown!)".contains("no member is named deadbeef or has a key starting with it (8 hex digits or more); members: laptop ("))
        await #expect(throws: CircleError.self) { try await engine.remove(String(otherKey.prefix(7))) }
        #expect(await engine.members.count == 4)
        #expect(await engine.epoch == 1)

        try await engine.remove(String(otherKey.prefix(8)).uppercased())
        #expect(await engine.members.map(\.name) == ["laptop", "phone", "tablet"])
        #expect(await engine.members.allSatisfy { Hex.encode($0.signing.bytes) != otherKey })
        #expect(await engine.epoch == 2)
    }

    @Test("two changes of the circle at the same moment: the relay's first stays everywhere, and the other is refused with nothing changed")
    func concurrentMembershipChanges() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        let (x, y) = (try Member("x", seed: 7), try Member("y", seed: 8))
        let circle = await members[0].engine.circle
        // Two sponsors vouch from the same head: both entries claim the same place.
        let forX = try await members[0].engine.vouch(for: SyncEngine.peerIdentity(of: x.fixture.device, name: "x"))
        let forY = try await members[1].engine.vouch(for: SyncEngine.peerIdentity(of: y.fixture.device, name: "y"))
        _ = try await SyncEngine.join(forX, device: x.fixture.device, transport: relay)
        let membership = relay.records(circle, .membership)
        let late = await #expect(throws: CircleError.self) { try await SyncEngine.join(forY, device: y.fixture.device, transport: relay) }
        #expect(late?.code == .staleVoucher && "\(late!)".contains("changed after the sponsor vouched"))
        #expect(relay.records(circle, .membership) == membership)
        #expect(!FileManager.default.fileExists(atPath: y.fixture.device.directory.appendingPathComponent("sync.json").path))

        // The tablet has not heard of the laptop's removal of x when it removes the phone: both
        // entries take the same place, and the tablet is told.
        let tabletLink = LaggingRelay(relay)
        members[1].engine = try #require(try await SyncEngine.open(device: members[1].fixture.device, transport: { _ in tabletLink }))
        try await members[2].engine.remove("x")
        tabletLink.lagging.withLock { $0 = true }
        await #expect(throws: CircleError.self) { try await members[1].engine.remove("phone") }
        try await settle(members)
        for member in members {
            #expect(await member.engine.members.map(\.name) == ["laptop", "phone", "tablet"], "\(member.name)")
            #expect(await member.engine.epoch == 2)
        }
        // Told, y asks again and joins; everyone sees it.
        members.append(y)
        members[3].engine = try await join(y, sponsor: members[1], relay)
        try await settle(members)
        for member in members { #expect(await member.engine.members.map(\.name) == ["laptop", "phone", "tablet", "y"], "\(member.name)") }
    }

    @Test(
        "deletions every member acknowledged leave the relay; a member away longer than it keeps them is told to resync, forgets what the circle deleted, keeps what it wrote, and converges"
    )
    func resyncAfterRetention() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-resync-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let relayClock = ManualClock(Date())
        let relay = MemoryRelay(compactingIn: directory, now: { relayClock.now() })
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        func add(_ member: Member, _ account: String) throws {
            _ = try member.keychain.add(.password(account: account, value: "\(account)-1", protection: .afterFirstUnlock, synchronizable: true))
        }
        func delete(_ member: Member, _ account: String) throws {
            try member.keychain.delete(
                ItemQuery(.genericPassword, attributes: [.account: .string(account), .service: .string("com.example.app")], synchronizable: .yes))
        }
        for account in ["kept", "deleted", "updated"] { try add(phone, account) }
        _ = try await settle(members)
        let circle = await phone.engine.circle
        let compacting = try #require(relay.compacting)
        func served() async throws -> [RelayRecord] { try await compacting.pull(circle: circle, stream: .envelopes, after: 0, limit: 10_000) }

        // The laptop goes away; the others delete, update and acknowledge.
        try delete(phone, "deleted")
        try tablet.keychain.update(ItemQuery.password(account: "updated", synchronizable: .yes), with: ItemChanges(data: Data("updated-2".utf8)))
        _ = try await settle([phone, tablet])
        _ = try await settle([phone, tablet])
        let tombstoneHeld = try await served().contains { record in
            (try? EnvelopeBatch(bytes: record.body))?.envelopes.contains { $0.header.isTombstone } == true
        }
        #expect(tombstoneHeld, "the laptop has not acknowledged the deletion: the relay keeps it")

        // A month on, the laptop still away: the relay lets the deletion go without it.
        relayClock.advance(by: 31 * 86_400)
        for member in members { member.fixture.clock.advance(by: 31 * 86_400) }
        // The phone writes again: the batch with its deletion is no longer its newest, which a relay always keeps.
        try add(phone, "later")
        _ = try await settle([phone, tablet])
        _ = try await settle([phone, tablet])
        let stillHeld = try await served().contains { record in
            (try? EnvelopeBatch(bytes: record.body))?.envelopes.contains { $0.header.isTombstone } == true
        }
        #expect(!stillHeld, "a deletion every member heard from acknowledged is let go")

        // The laptop comes back with a change of its own, and resyncs.
        try add(laptop, "written-while-away")
        let report = try await laptop.engine.sync()
        #expect(report.resynced && report.forgottenInResync == 1, "\(report)")
        let reports = try await settle(members)
        #expect(reports.allSatisfy { !$0.resynced && $0.rejected.isEmpty }, "one resync, and none again")
        let reference = try phone.synchronizedItems()
        func holds(_ account: String) -> Bool { reference.values.contains { $0.contains("value: \(account))") } }
        #expect(reference.count == 4 && holds("written-while-away") && holds("later") && !holds("deleted"), "\(reference.values)")
        for member in members { #expect(try member.synchronizedItems() == reference, "\(member.name) differs") }
    }

    @Test(
        "a seeded random workload on three members, one powered off and one locked part of the time, converges to what the merge rule makes of every version pushed",
        arguments: [UInt64(11), 12, 13], [false, true])
    func randomWorkload(seed: UInt64, compacting: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-compacting-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let relay = MemoryRelay(compactingIn: compacting ? directory : nil)
        var members = try await circleOfThree(relay)
        var random = SeededGenerator(seed: seed)
        let accounts = (0..<6).map { "acct\($0)" }
        var laptopOff = false
        for step in 0..<60 {
            // The laptop goes off now and then; while off it neither writes nor syncs, and it
            // comes back from what it saved on disk.
            if step % 15 == 5 { laptopOff = true }
            if step % 15 == 12 {
                laptopOff = false
                members[2].engine = try #require(try await SyncEngine.open(device: members[2].fixture.device, transport: { _ in relay }))
            }
            // The phone locks now and then: class A waits in both directions while it is locked.
            if step % 10 == 2 { try members[0].fixture.device.lock(immediately: true) }
            if step % 10 == 7 { try members[0].fixture.device.unlock(passcode: TestDevice.defaultPasscode) }
            let writers = laptopOff ? Array(members.prefix(2)) : members
            let member = writers[Int.random(in: 0..<writers.count, using: &random)]
            let account = accounts[Int.random(in: 0..<accounts.count, using: &random)]
            let keychain = try member.keychain
            let query = ItemQuery.password(account: account, synchronizable: .yes)
            let exists = (try? keychain.copy(query)) != nil
            do {
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where !exists:
                    _ = try keychain.add(
                        .password(account: account, value: "v\(step)", protection: [.whenUnlocked, .afterFirstUnlock, .always][step % 3], synchronizable: true))
                case 1 where exists:
                    try keychain.update(query, with: ItemChanges(data: Data("v\(step)".utf8)))
                case 2 where exists:
                    try keychain.delete(
                        ItemQuery(.genericPassword, attributes: [.account: .string(account), .service: .string("com.example.app")], synchronizable: .yes))
                default:
                    break
                }
            } catch let error as KeychainError where [.interactionNotAllowed, .duplicateItem].contains(error.status) {
                // Locked: a class A item cannot be read or written, as on a phone; try another step.
            }
            // Some members sync after some steps, in a random order.
            for other in writers.shuffled(using: &random) where Bool.random(using: &random) { _ = try await other.engine.sync() }
        }
        members[2].engine = try #require(try await SyncEngine.open(device: members[2].fixture.device, transport: { _ in relay }))
        if members[0].fixture.device.lockState == .locked { try members[0].fixture.device.unlock(passcode: TestDevice.defaultPasscode) }
        let reports = try await settle(members)
        #expect(reports.allSatisfy { $0.rejected.isEmpty })
        let reference = try members[0].synchronizedItems()
        #expect(!reference.isEmpty, "the workload leaves items to compare")
        for member in members { #expect(try member.synchronizedItems() == reference, "\(member.name) differs (seed \(seed))") }
        // At most one item per account: two adds of one primary key on different members resolve to one.
        #expect(Set(reference.values.map { $0.split(separator: "|")[2] }).count == reference.count)
        // And it is what the merge rule makes of every version ever pushed.
        let model = try await mergeModel(relay, circle: members[0].engine.circle, keysFrom: members[0].fixture.device)
        #expect(model.count == reference.count)
        for member in members {
            #expect(
                try member.synchronizedItems().mapValues { String($0.split(separator: "|").last ?? "") } == model,
                "\(member.name) is not the model (seed \(seed))")
        }
        guard let compacted = relay.compacting else { return }
        // The relay dropped superseded batches, and said so: no member counts a batch missing.
        let circle = await members[0].engine.circle
        let served = try await compacted.pull(circle: circle, stream: .envelopes, after: 0, limit: 100_000)
        let batches = served.filter { !CompactedBatches.isNote($0.body) }.count
        #expect(batches < relay.records(circle, .envelopes).count, "\(batches) batches of \(relay.records(circle, .envelopes).count) kept")
        for member in members {
            let missing = await member.engine.received.chains.values.filter { !$0.missing.isEmpty }.count
            #expect(missing == 0, "a member counts batches missing (seed \(seed))")
        }
    }

    /// The circle's first key generation, as `device` (a member) holds it.
    private func firstGeneration(_ relay: MemoryRelay, circle: UUID, keysFrom device: Device) throws -> CircleKeys {
        let circleKey = try #require(try SyncSecrets.circleKey(device, circle: circle, epoch: 1))
        let published = relay.records(circle, .keys).compactMap { body -> [UInt8]? in
            if case .classKeys(let keys)? = try? KeyRecord(bytes: body), keys.epoch == 1 { keys.wrapped } else { nil }
        }
        return try CircleKeys(circle: circle, epoch: 1, circleKey: circleKey, wrappedClassKeys: try #require(published.first))
    }

    @Test(
        "a member's versions are taken in either envelope format; a seal that does not open, or carries access control, is refused and nothing of it is written"
    )
    func whatMembersSend() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        let circle = await phone.engine.circle
        let keys = try firstGeneration(relay, circle: circle, keysFrom: phone.fixture.device)
        let author = try SyncSecrets.identity(of: phone.fixture.device).signingKey
        let now = phone.fixture.device.now
        func item(_ account: String, attributes: Attributes? = nil) -> SyncedItem {
            SyncedItem(
                version: HybridTimestamp(milliseconds: UInt64(now.timeIntervalSince1970 * 1000)), isTombstone: false,
                record: ItemRecord(
                    itemClass: .genericPassword, uuid: UUID(), accessGroup: "\(TestDevice.teamID).\(TestDevice.appID)",
                    protection: .afterFirstUnlock, synchronizable: true, accessControl: nil, creationDate: now, modificationDate: now,
                    attributes: attributes ?? [.account: .string(account), .service: .string("com.example.app")], data: Data("\(account)-secret".utf8)))
        }
        func keyed(_ item: SyncedItem, _ edit: (inout KeyedItem) -> Void) throws -> SealedEnvelope {
            let seal = ItemSeal.sealing(item.record)
            var keyed = KeyedItem(
                uuid: item.record.uuid, itemClass: item.record.itemClass, protection: item.record.protection, version: item.version,
                isTombstone: false, key: seal.key, metadata: seal.metadata, secret: seal.secret)
            edit(&keyed)
            return try SealedEnvelope.seal(keyed, keys: keys, author: author.publicKey)
        }
        var controlled = item("controlled")
        controlled.record.accessControl = try AccessControl(protection: .afterFirstUnlock, flags: .userPresence)
        let envelopes = [
            try SealedEnvelope.sealPayload(item("format-1"), keys: keys, author: author.publicKey),
            try SealedEnvelope.seal(item("format-2"), keys: keys, author: author.publicKey),
            // Without the service an add would have written: stored, sealed again here.
            try SealedEnvelope.seal(item("no-service", attributes: [.account: .string("no-service")]), keys: keys, author: author.publicKey),
            try SealedEnvelope.seal(controlled, keys: keys, author: author.publicKey),
            try keyed(item("foreign-secret")) { $0.secret = ItemSeal.sealing(item("other").record).secret },
            try keyed(item("foreign-metadata")) { $0.metadata = ItemSeal.sealing(item("other").record).metadata },
        ]
        try await relay.push([EnvelopeBatch(envelopes, circle: circle, author: author).bytes], circle: circle, stream: .envelopes)
        let report = try await tablet.engine.sync()
        #expect(report.applied == 3)
        #expect(report.rejected.count == 3 && report.rejected.allSatisfy { $0.reason == .inconsistent }, "\(report.rejected)")
        #expect(report.rejected.contains { $0.detail.contains("carries access control") })
        #expect(report.rejected.contains { $0.detail.contains("its secret does not open") })
        #expect(report.rejected.contains { $0.detail.contains("its metadata does not open") })
        for account in ["format-1", "format-2", "no-service"] {
            let query = ItemQuery(.genericPassword, attributes: [.account: .string(account)], synchronizable: .yes, returning: [.data])
            let found = try tablet.keychain.copy(query)
            #expect(found.first?.data == Data("\(account)-secret".utf8))
        }
        for account in ["controlled", "foreign-secret", "foreign-metadata"] {
            #expect(throws: KeychainError.self) { try tablet.keychain.copy(.password(account: account, synchronizable: .yes)) }
        }
    }

    /// Every version on the relay, opened, reduced by the merge rule alone: per UUID the
    /// preferred version; of those that share a primary key (an account here) the preferred
    /// one, a deletion included (a newer delete of the key also removes an older item added
    /// under it elsewhere). The data each surviving item holds, by UUID.
    private func mergeModel(_ relay: MemoryRelay, circle: UUID, keysFrom device: Device) throws -> [UUID: String] {
        let keys = try firstGeneration(relay, circle: circle, keysFrom: device)
        var newest: [UUID: (item: SyncedItem, stamp: VersionStamp)] = [:]
        for body in relay.records(circle, .envelopes) {
            for envelope in try EnvelopeBatch(bytes: body).envelopes {
                let contents = try envelope.open(with: keys)
                let version = (item: try contents.openedItem(), stamp: contents.stamp)
                if let held = newest[version.item.record.uuid], !MergeRule.prefers(version.stamp, over: held.stamp) { continue }
                newest[version.item.record.uuid] = version
            }
        }
        var byAccount: [AttributeValue: (item: SyncedItem, stamp: VersionStamp)] = [:]
        for version in newest.values {
            let account = try #require(version.item.record.attributes[.account])
            if let other = byAccount[account], !MergeRule.prefers(version.stamp, over: other.stamp) { continue }
            byAccount[account] = version
        }
        return Dictionary(
            uniqueKeysWithValues: byAccount.values.map(\.item).filter { !$0.isTombstone }.map {
                ($0.record.uuid, String(decoding: $0.record.data ?? Data(), as: UTF8.self))
            })
    }

    /// A circle of three on `relay` where the phone wrote "replayed" as "first", then "second",
    /// and every member holds the second: the tablet, and a replay of the first's record.
    private func twoVersions(_ relay: MemoryRelay) async throws -> (tablet: Member, replay: () -> Void) {
        let members = try await circleOfThree(relay)
        let phone = members[0]
        let circle = await phone.engine.circle
        _ = try phone.keychain.add(.password(account: "replayed", value: "first", synchronizable: true))
        try await settle(members)
        let first = try #require(relay.records(circle, .envelopes).last)
        try phone.keychain.update(.password(account: "replayed", synchronizable: .yes), with: ItemChanges(data: Data("second".utf8)))
        try await settle(members)
        return (members[1], { relay.replay(first, circle, .envelopes) })
    }

    /// Serves the first version again: `engine` supersedes it, and `member` keeps the second.
    private func expectRefused(_ replay: () -> Void, by engine: SyncEngine, of member: Member) async throws {
        replay()
        let report = try await engine.sync()
        #expect(report.applied == 0 && report.superseded == 1)
        #expect(try member.keychain.copy(.password(account: "replayed", synchronizable: .yes)).first?.data == Data("second".utf8))
    }

    @Test("a sync.json that kept the versions held (format 1) hands them to the keychain, and replays stay refused")
    func formatOneState() async throws {
        let relay = MemoryRelay()
        let (tablet, replayed) = try await twoVersions(relay)

        // The state as the previous format kept it: the versions in sync.json, none in the keychain.
        let keychain = tablet.fixture.device.deviceKeychain
        let held = try keychain.replicaVersions(of: try tablet.synchronizedItems().keys)
        #expect(held.count == 1)
        var state = try #require(try SyncState.load(from: tablet.fixture.device.directory))
        state.format = 1
        state.held = try held.mapValues { replica in
            let version = try #require(HeldVersion(replica))
            return SyncState.Held(
                milliseconds: version.stamp.timestamp.milliseconds, counter: version.stamp.timestamp.counter,
                digest: Data(version.stamp.digest), changeSequence: version.changeSequence)
        }
        try state.save(in: tablet.fixture.device.directory)
        try keychain.forgetReplicaVersions()

        let reopened = try #require(try await SyncEngine.open(device: tablet.fixture.device, transport: { _ in relay }))
        #expect(try keychain.replicaVersions(of: held.keys) == held)
        let saved = try #require(try SyncState.load(from: tablet.fixture.device.directory))
        #expect(saved.format == 2 && saved.held == nil)
        try await expectRefused(replayed, by: reopened, of: tablet)
    }

    @Test("an older version the relay serves again changes nothing: replays are recognised by their signed version")
    func replay() async throws {
        let relay = MemoryRelay()
        let (tablet, replayed) = try await twoVersions(relay)
        try await expectRefused(replayed, by: tablet.engine, of: tablet)
    }
}
