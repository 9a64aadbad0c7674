import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
@testable import Sync
import Synchronization
import Testing

/// A relay held in memory: logs per circle and stream, each record once, as `RelayStorage`
/// keeps them.
final class MemoryRelay: RelayTransport {
    private let logs = Mutex<[String: [[UInt8]]]>([:])

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> Int {
        logs.withLock { logs in
            let key = "\(circle)/\(stream)"
            let new = bodies.filter { !(logs[key] ?? []).contains($0) }
            logs[key, default: []] += new
            return new.count
        }
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        logs.withLock { logs in
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
    let lagging = Mutex(false)

    init(_ relay: MemoryRelay) { self.relay = relay }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> Int {
        try await relay.push(bodies, circle: circle, stream: stream)
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        if stream == .membership, lagging.withLock({ was in defer { was = false }; return was }) { return [] }
        return try await relay.pull(circle: circle, stream: stream, after: cursor, limit: limit)
    }
}

/// A member: a test device and its engine.
struct Member {
    let name: String
    let fixture: TestDevice
    var engine: SyncEngine!
    static let relayURL = URL(string: "http://relay.invalid")!

    init(_ name: String, seed: UInt64) throws {
        self.name = name
        fixture = try TestDevice(seed: seed)
    }

    var keychain: Keychain { get throws { try fixture.keychain() } }

    /// What this member holds that replicates: uuid, attributes and data of live items.
    func synchronizedItems() throws -> [UUID: String] {
        var items: [UUID: String] = [:]
        for change in try fixture.device.deviceKeychain.changes(since: 0, includingData: true)
        where SyncEligibility(change.record) == .replicates && !change.isTombstone {
            let r = change.record
            items[r.uuid] = "\(r.accessGroup)|\(r.protection.name)|\(r.attributes.sorted { $0.key < $1.key })|\(String(decoding: r.data ?? Data(), as: UTF8.self))"
        }
        return items
    }

    func localItems() throws -> Set<UUID> {
        Set(try fixture.device.deviceKeychain.changes(since: 0).filter { !$0.record.synchronizable }.map(\.record.uuid))
    }
}

/// Three members of one circle on an in-memory relay: phone creates it and vouches for the
/// others. The laptop's wall clock runs `laptopSkew` milliseconds behind.
func circleOfThree(_ relay: MemoryRelay, laptopSkew: UInt64 = 0) async throws -> [Member] {
    var phone = try Member("phone", seed: 1), tablet = try Member("tablet", seed: 2), laptop = try Member("laptop", seed: 3)
    phone.engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: relay)
    let circle = await phone.engine.circle
    for index in [1, 2] {
        let joiner = index == 1 ? tablet : laptop
        try await phone.engine.vouch(for: SyncEngine.peerIdentity(of: joiner.fixture.device, name: joiner.name))
        let skew: UInt64 = index == 2 ? laptopSkew : 0
        let engine = try await SyncEngine.join(circle, device: joiner.fixture.device, name: joiner.name, relay: Member.relayURL, transport: relay,
                                               wallClock: { SyncEngine.systemWallClock() - skew })
        if index == 1 { tablet.engine = engine } else { laptop.engine = engine }
    }
    return [phone, tablet, laptop]
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
    @Test("adds, updates, renames and deletes on different members leave all three with the same synchronizable items, and none with another's local ones")
    func converges() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        for (member, protection) in [(phone, ProtectionClass.whenUnlocked), (tablet, .afterFirstUnlock), (laptop, .always)] {
            _ = try member.keychain.add(.password(account: "\(member.name)-shared", value: "MARKER-\(member.name)", protection: protection, synchronizable: true))
            _ = try member.keychain.add(.password(account: "\(member.name)-local", protection: protection))
            _ = try member.keychain.add(.password(account: "\(member.name)-bound", protection: .afterFirstUnlockThisDeviceOnly, synchronizable: true))
        }
        let first = try await settle(members)
        #expect(first.contains { $0.skippedDeviceBound > 0 })
        #expect(try members.allSatisfy { try $0.synchronizedItems().count == 3 })

        try tablet.keychain.update(.password(account: "phone-shared", synchronizable: .yes), with: ItemChanges(data: Data("edited on tablet".utf8)))
        try laptop.keychain.update(.password(account: "tablet-shared", synchronizable: .yes), with: ItemChanges(attributes: [.account: .string("tablet-renamed")]))
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
        let members = try await circleOfThree(relay, laptopSkew: 3_600_000)
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

    @Test("a device no member vouched for cannot join, and envelopes from outside the circle are refused")
    func outsiders() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let stranger = try Member("stranger", seed: 9)
        let circle = await members[0].engine.circle
        await #expect(throws: CircleError.self) {
            try await SyncEngine.join(circle, device: stranger.fixture.device, name: "stranger", relay: Member.relayURL, transport: relay)
        }
        #expect(!FileManager.default.fileExists(atPath: stranger.fixture.device.directory.appendingPathComponent("sync.json").path))
        let keys = CircleKeys(circle: circle, epoch: 1)
        let record = ItemRecord(itemClass: .genericPassword, uuid: UUID(), accessGroup: "\(TestDevice.teamID).\(TestDevice.appID)",
                                protection: .afterFirstUnlock, synchronizable: true, accessControl: nil, creationDate: Date(),
                                modificationDate: Date(), attributes: [.account: .string("forged")], data: Data("x".utf8))
        let outsider = SigningKey(seed: SymmetricKey())  // a device outside the circle
        let forged = try SealedEnvelope.seal(SyncedItem(version: HybridTimestamp(milliseconds: .max / 2), isTombstone: false, record: record),
                                             keys: keys, author: outsider.publicKey)
        try await relay.push([EnvelopeBatch([forged], circle: circle, author: outsider).bytes], circle: circle, stream: .envelopes)
        let report = try await members[1].engine.sync()
        #expect(report.rejected.count == 1 && report.applied == 0)
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
        let before = try SyncEngine.peerIdentity(of: tablet, name: "tablet")
        members[1].engine = try #require(try await SyncEngine.open(device: tablet, transport: { _ in relay }))
        #expect(try SyncEngine.peerIdentity(of: tablet, name: "tablet") == before)
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
        let laptopKey = try SyncEngine.peerIdentity(of: laptop.fixture.device, name: "laptop").sealing
        let sharesOfTwo = relay.records(circle, .keys).compactMap { try? KeyRecord(bytes: $0) }.compactMap { record -> CircleKeyShare? in
            if case .share(let share) = record, share.epoch == 2 { share } else { nil }
        }
        #expect(sharesOfTwo.count == 2 && !sharesOfTwo.contains { $0.recipient == laptopKey })
    }

    @Test("a member is removed by name, or by the start of its key when two share a name; an ambiguous or unknown one is refused with nothing changed")
    func removalByKey() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let other = try Member("phone", seed: 4)
        let otherPeer = try SyncEngine.peerIdentity(of: other.fixture.device, name: "phone")
        try await members[0].engine.vouch(for: otherPeer)
        let otherKey = Hex.encode(otherPeer.signing.bytes)
        let engine = members[1].engine!

        let ambiguous = await #expect(throws: CircleError.self) { try await engine.remove("phone") }
        #expect("\(ambiguous!)".contains("2 members match phone: phone ("))
        let unknown = await #expect(throws: CircleError.self) { try await engine.remove("deadbeef") }
        #expect("\(unknown!)".contains("no member is named deadbeef or has a key starting with it; members: laptop ("))
        await #expect(throws: CircleError.self) { try await engine.remove(String(otherKey.prefix(7))) }
        #expect(await engine.members.count == 4)
        #expect(await engine.epoch == 1)

        try await engine.remove(String(otherKey.prefix(8)).uppercased())
        #expect(await engine.members.map(\.name) == ["laptop", "phone", "tablet"])
        #expect(await engine.members.allSatisfy { Hex.encode($0.signing.bytes) != otherKey })
        #expect(await engine.epoch == 2)
    }

    @Test("two members changing the circle at the same moment: the relay's first stays everywhere, and the other's author is told, with nothing changed")
    func concurrentMembershipChanges() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        let (x, y) = (try Member("x", seed: 7), try Member("y", seed: 8))
        let tabletLink = LaggingRelay(relay)
        members[1].engine = try #require(try await SyncEngine.open(device: members[1].fixture.device, transport: { _ in tabletLink }))
        try await members[0].engine.vouch(for: SyncEngine.peerIdentity(of: x.fixture.device, name: "x"))
        // The tablet has not heard of x when it vouches for y: both entries take the same place.
        tabletLink.lagging.withLock { $0 = true }
        await #expect(throws: CircleError.self) { try await members[1].engine.vouch(for: SyncEngine.peerIdentity(of: y.fixture.device, name: "y")) }
        try await settle(members)
        let everyone = ["laptop", "phone", "tablet", "x"]
        for member in members { #expect(await member.engine.members.map(\.name) == everyone, "\(member.name)") }
        let circle = await members[0].engine.circle
        _ = try await SyncEngine.join(circle, device: x.fixture.device, name: "x", relay: Member.relayURL, transport: relay)
        await #expect(throws: CircleError.self) {
            try await SyncEngine.join(circle, device: y.fixture.device, name: "y", relay: Member.relayURL, transport: relay)
        }
        // Told, the tablet tries again and succeeds; a removal after that is seen by everyone.
        try await members[1].engine.vouch(for: SyncEngine.peerIdentity(of: y.fixture.device, name: "y"))
        try await members[2].engine.remove("x")
        try await settle(members)
        for member in members {
            #expect(await member.engine.members.map(\.name) == ["laptop", "phone", "tablet", "y"], "\(member.name)")
            #expect(await member.engine.epoch == 2)
        }
    }

    @Test("a seeded random workload on three members, one powered off part of the time, converges to what the merge rule makes of every version pushed", arguments: [UInt64(11), 12, 13])
    func randomWorkload(seed: UInt64) async throws {
        let relay = MemoryRelay()
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
            let writers = laptopOff ? Array(members.prefix(2)) : members
            let member = writers[Int.random(in: 0..<writers.count, using: &random)]
            let account = accounts[Int.random(in: 0..<accounts.count, using: &random)]
            let keychain = try member.keychain
            let query = ItemQuery.password(account: account, synchronizable: .yes)
            let exists = (try? keychain.copy(query)) != nil
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where !exists:
                _ = try keychain.add(.password(account: account, value: "v\(step)", protection: [.whenUnlocked, .afterFirstUnlock, .always][step % 3], synchronizable: true))
            case 1 where exists:
                try keychain.update(query, with: ItemChanges(data: Data("v\(step)".utf8)))
            case 2 where exists:
                try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string(account), .service: .string("com.example.app")], synchronizable: .yes))
            default:
                break
            }
            // Some members sync after some steps, in a random order.
            for other in writers.shuffled(using: &random) where Bool.random(using: &random) { _ = try await other.engine.sync() }
        }
        members[2].engine = try #require(try await SyncEngine.open(device: members[2].fixture.device, transport: { _ in relay }))
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
            #expect(try member.synchronizedItems().mapValues { String($0.split(separator: "|").last ?? "") } == model, "\(member.name) is not the model (seed \(seed))")
        }
    }

    /// Every version on the relay, opened, reduced by the merge rule alone: per UUID the
    /// preferred version; of those that share a primary key (an account here) the preferred
    /// one, a deletion included (a newer delete of the key also removes an older item added
    /// under it elsewhere). The data each surviving item holds, by UUID.
    private func mergeModel(_ relay: MemoryRelay, circle: UUID, keysFrom device: Device) throws -> [UUID: String] {
        let circleKey = try #require(try SyncSecrets.circleKey(device, circle: circle, epoch: 1))
        let published = relay.records(circle, .keys).compactMap { body -> [UInt8]? in
            if case .classKeys(1, let wrapped)? = try? KeyRecord(bytes: body) { wrapped } else { nil }
        }
        let keys = try CircleKeys(circle: circle, epoch: 1, circleKey: circleKey, wrappedClassKeys: try #require(published.first))
        var newest: [UUID: SyncedItem] = [:]
        for body in relay.records(circle, .envelopes) {
            for envelope in try EnvelopeBatch(bytes: body).envelopes {
                let item = try envelope.open(with: keys)
                if let held = newest[item.record.uuid], !MergeRule.prefers(item, over: held) { continue }
                newest[item.record.uuid] = item
            }
        }
        var byAccount: [AttributeValue: SyncedItem] = [:]
        for item in newest.values {
            let account = try #require(item.record.attributes[.account])
            if let other = byAccount[account], !MergeRule.prefers(item, over: other) { continue }
            byAccount[account] = item
        }
        return Dictionary(uniqueKeysWithValues: byAccount.values.filter { !$0.isTombstone }.map { ($0.record.uuid, String(decoding: $0.record.data ?? Data(), as: UTF8.self)) })
    }

    @Test("an older version the relay serves again changes nothing: replays are recognised by their signed version")
    func replay() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        let circle = await phone.engine.circle
        _ = try phone.keychain.add(.password(account: "replayed", value: "first", synchronizable: true))
        try await settle(members)
        let first = try #require(relay.records(circle, .envelopes).last)
        try phone.keychain.update(.password(account: "replayed", synchronizable: .yes), with: ItemChanges(data: Data("second".utf8)))
        try await settle(members)
        relay.replay(first, circle, .envelopes)
        let report = try await tablet.engine.sync()
        #expect(report.applied == 0 && report.superseded == 1)
        #expect(try tablet.keychain.copy(.password(account: "replayed", synchronizable: .yes)).first?.data == Data("second".utf8))
    }
}
