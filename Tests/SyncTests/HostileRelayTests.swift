import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import KeyferryThreads
import Testing

@testable import Sync
@testable import SyncWire

/// A relay that hides chosen records from the member using it: what an untrusted relay can do
/// to one member and not the others.
final class WithholdingRelay: RelayTransport {
    let relay: MemoryRelay
    let hidden = Locked<Set<[UInt8]>>([])

    init(_ relay: MemoryRelay) { self.relay = relay }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        try await relay.push(bodies, circle: circle, stream: stream, proof: proof)
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        let hidden = hidden.withLock { $0 }
        return try await relay.pull(circle: circle, stream: stream, after: cursor, limit: limit).filter { !hidden.contains($0.body) }
    }
}

/// A relay that answers every pull of envelopes with one more junk record, for ever.
final class EndlessRelay: RelayTransport {
    let relay: MemoryRelay

    init(_ relay: MemoryRelay) { self.relay = relay }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        try await relay.push(bodies, circle: circle, stream: stream, proof: proof)
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        guard stream == .envelopes else { return try await relay.pull(circle: circle, stream: stream, after: cursor, limit: limit) }
        return [RelayRecord(cursor: cursor + 1, body: Array("junk \(cursor)".utf8))]
    }
}

/// A relay that counts the pulls of each stream, to see what a member asks for.
final class CountingRelay: RelayTransport {
    let relay: MemoryRelay
    let pulls = Locked<[RelayStream: Int]>([:])

    init(_ relay: MemoryRelay) { self.relay = relay }

    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        try await relay.push(bodies, circle: circle, stream: stream, proof: proof)
    }

    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        pulls.withLock { $0[stream, default: 0] += 1 }
        return try await relay.pull(circle: circle, stream: stream, after: cursor, limit: limit)
    }
}

/// What a relay, a stranger who can reach it, or a member about to be removed can try against
/// a circle: Appendix A of the security review, and more.
@Suite("A hostile relay or member")
struct HostileRelayTests {
    @Test("a relay cannot give a joining device a circle of its own, even under the real circle's id")
    func forgedCircleForJoiner() async throws {
        let real = MemoryRelay()
        let forged = MemoryRelay()
        var phone = try Member("phone", seed: 1)
        let tablet = try Member("tablet", seed: 2)
        phone.engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: real)
        let circle = await phone.engine.circle
        let tabletPeer = try await SyncEngine.peerIdentity(of: tablet.fixture.device, name: "tablet")
        let voucher = try await phone.engine.vouch(for: tabletPeer)

        // The attacker makes a history under the real id, with its own key as the creator, and
        // admits the tablet to it with keys it holds.
        let attacker = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let create = MembershipEntry(
            .create, circle: circle, sequence: 0, previous: SystemEntropy().bytes(32),
            subject: attacker.peer(named: "phone"), signer: attacker.signingKey)
        let join = MembershipEntry(
            .join, circle: circle, sequence: 1, previous: ContentDigest.of(create.bytes), subject: tabletPeer,
            signer: attacker.signingKey)
        let keys = CircleKeys(circle: circle, epoch: 1)
        try await forged.push([create.bytes, join.bytes], circle: circle, stream: .membership)
        try await forged.push(
            [
                KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: attacker.signingKey)).bytes,
                KeyRecord.share(CircleKeyShare(keys, to: tabletPeer.sealing, from: attacker.signingKey)).bytes,
            ],
            circle: circle, stream: .keys)
        let attackerVoucher = Voucher(
            circle: circle, relay: Member.relayURL, head: ContentDigest.of(join.bytes), request: nil, entry: nil,
            shares: [CircleKeyShare(keys, to: tabletPeer.sealing, from: attacker.signingKey)], sponsor: attacker.signingKey)
        for attempt in [voucher, attackerVoucher] {
            await #expect(throws: CircleError.self) {
                _ = try await SyncEngine.join(attempt, device: tablet.fixture.device, transport: forged)
            }
        }
        #expect(forged.records(circle, .membership).count == 2, "nothing was published to the forged relay")
        #expect(!FileManager.default.fileExists(atPath: tablet.fixture.device.directory.appendingPathComponent("sync.json").path))

        // The sponsor's voucher, through the real relay, joins the real circle.
        let tabletEngine = try await SyncEngine.join(voucher, device: tablet.fixture.device, transport: real)
        let names = await tabletEngine.members.map(\.name)
        #expect(names == ["phone", "tablet"])
    }

    @Test("a member cannot plant the keys of the generation that removes it, and reads nothing written after")
    func plantedGeneration() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet, laptop) = (members[0], members[1], members[2])
        let circle = await phone.engine.circle
        let laptopID = try SyncSecrets.identity(of: laptop.fixture.device)
        let planted = CircleKeys(circle: circle, epoch: 2)
        var records = [KeyRecord.classKeys(PublishedClassKeys(planted, wrapped: planted.wrappedClassKeys(), signer: laptopID.signingKey)).bytes]
        for member in [phone, tablet] {
            let peer = try await SyncEngine.peerIdentity(of: member.fixture.device, name: member.name)
            records.append(KeyRecord.share(CircleKeyShare(planted, to: peer.sealing, from: laptopID.signingKey)).bytes)
        }
        try await relay.push(records, circle: circle, stream: .keys)
        let reports = try await settle(members)
        #expect(
            reports.contains {
                $0.rejected.contains { $0.reason == .unknownGeneration && $0.detail.contains("generation 2, which no membership entry started") }
            })

        try await phone.engine.remove("laptop")
        _ = try tablet.keychain.add(.password(account: "after", synchronizable: true))
        try await settle([phone, tablet])
        let tabletKey = try #require(await tablet.engine.signingKey)
        let sealed = relay.records(circle, .envelopes).compactMap { try? EnvelopeBatch(bytes: $0) }
            .filter { $0.author == tabletKey }.flatMap(\.envelopes).filter { $0.header.epoch == 2 }
        #expect(!sealed.isEmpty)
        #expect(sealed.allSatisfy { (try? $0.open(with: planted)) == nil }, "the planted keys open nothing written after the removal")
        #expect(try phone.keychain.copy(.password(account: "after", synchronizable: .yes)).first?.data == Data("secret".utf8))

        // Planted again now that generation 2 exists: refused as not its author's.
        relay.replay(records[0], circle, .keys)
        relay.replay(records[1], circle, .keys)
        let report = try await phone.engine.sync()
        #expect(report.rejected.contains { $0.reason == .forged && $0.detail.contains("not signed by the member who made it") }, "\(report.rejected)")
        #expect(report.rejected.contains { $0.reason == .notAMember && $0.detail.contains("outside the circle") }, "\(report.rejected)")
    }

    @Test("a second, different key for a generation from its own author is refused, and the first stays")
    func secondKeyForAGeneration() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let (phone, tablet) = (members[0], members[1])
        let circle = await phone.engine.circle
        let phoneID = try SyncSecrets.identity(of: phone.fixture.device)
        let tabletPeer = try await SyncEngine.peerIdentity(of: tablet.fixture.device, name: "tablet")
        let other = CircleKeys(circle: circle, epoch: 1)
        try await relay.push(
            [
                KeyRecord.classKeys(PublishedClassKeys(other, wrapped: other.wrappedClassKeys(), signer: phoneID.signingKey)).bytes,
                KeyRecord.share(CircleKeyShare(other, to: tabletPeer.sealing, from: phoneID.signingKey)).bytes,
            ],
            circle: circle, stream: .keys)
        let report = try await tablet.engine.sync()
        #expect(
            report.rejected.contains { $0.reason == .conflictingKeys && $0.detail.contains("a second, different set of class keys for generation 1") },
            "\(report.rejected)")
        #expect(report.rejected.contains { $0.detail.contains("a second, different circle key for generation 1") }, "\(report.rejected)")
        _ = try phone.keychain.add(.password(account: "still", synchronizable: true))
        try await settle(members)
        #expect(try tablet.keychain.copy(.password(account: "still", synchronizable: .yes)).count == 1)
    }

    @Test("records from strangers on the relay do not stop a circle, before or after its members restart")
    func strangerCannotStopACircle() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        let circle = await members[0].engine.circle
        let history = await members[0].engine.history
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let far = MembershipEntry(
            .join, circle: circle, sequence: UInt32(history.entries.count + 5),
            previous: ContentDigest.of(history.entries.last!.bytes), subject: stranger.peer(named: "x"), signer: stranger.signingKey)
        let next = MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: stranger.signingKey)
        try await relay.push([far.bytes, next.bytes, [MembershipEntry.formatVersion, 0, 1]], circle: circle, stream: .membership)
        let garbage = CircleKeys(circle: circle, epoch: 1)
        let garbageKeys = KeyRecord.classKeys(PublishedClassKeys(garbage, wrapped: SystemEntropy().bytes(144), signer: stranger.signingKey))
        try await relay.push([[1] + SystemEntropy().bytes(148), [3, 9, 9], garbageKeys.bytes], circle: circle, stream: .keys)
        try await relay.push([SystemEntropy().bytes(300)], circle: circle, stream: .envelopes)

        let reports = try await settle(members)
        let refused = reports.map(\.rejectedCount).reduce(0, +)
        #expect(refused >= 3 * 6, "each member passes over the junk, and says so")
        _ = try members[0].keychain.add(.password(account: "still", synchronizable: true))
        try await settle(members)
        #expect(try members[2].keychain.copy(.password(account: "still", synchronizable: .yes)).count == 1)

        // Restarted members, which read their state back, go on too; vouch and remove work.
        for index in members.indices {
            members[index].engine = try #require(try await SyncEngine.open(device: members[index].fixture.device) { _ in relay })
        }
        _ = try members[1].keychain.add(.password(account: "after restart", synchronizable: true))
        try await settle(members)
        #expect(try members[0].keychain.copy(.password(account: "after restart", synchronizable: .yes)).count == 1)
        let joiner = try Member("joiner", seed: 4)
        _ = try await join(joiner, sponsor: members[0], relay)
        try await members[0].engine.remove("laptop")
        let names = await members[0].engine.members.map(\.name)
        #expect(names == ["joiner", "phone", "tablet"])
    }

    @Test("a flood of junk on the relay gives bounded reports and passes that return, and what members wrote still arrives")
    func flood() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let circle = await members[0].engine.circle
        var junk: [[UInt8]] = []
        for n in 0..<5_000 { junk.append(Array("junk batch \(n)".utf8)) }
        try await relay.push(junk, circle: circle, stream: .envelopes)
        _ = try members[0].keychain.add(.password(account: "behind the junk", synchronizable: true))
        _ = try await members[0].engine.sync()

        var passes: [SyncReport] = []
        repeat { passes.append(try await members[1].engine.sync()) } while passes.last!.more && passes.count < 10
        #expect(passes.count == 3, "5,000 records in passes of at most \(SyncEngine.maximumRecordsPerPass)")
        #expect(passes.allSatisfy { $0.rejected.count <= SyncReport.keptReasons })
        let refused = passes.map(\.rejectedCount).reduce(0, +)
        #expect(refused == 5_000)
        #expect(try members[1].keychain.copy(.password(account: "behind the junk", synchronizable: .yes)).count == 1)

        // A relay that always has one more record: the pass still returns, and says there is more.
        let endless = try #require(try await SyncEngine.open(device: members[2].fixture.device) { _ in EndlessRelay(relay) })
        let report = try await endless.sync()
        #expect(report.more)
        #expect(report.rejectedCount == SyncEngine.maximumRecordsPerPass)
        #expect(report.rejected.count == SyncReport.keptReasons)
    }

    @Test("key records for generations that do not exist cost a member one more read of the membership, not one each")
    func unknownGenerations() async throws {
        let relay = MemoryRelay()
        let members = try await circleOfThree(relay)
        let circle = await members[0].engine.circle
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let junk = (0..<1_000).map { n -> [UInt8] in
            let keys = CircleKeys(circle: circle, epoch: UInt32(100 + n))
            return KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: stranger.signingKey)).bytes
        }
        try await relay.push(junk, circle: circle, stream: .keys)
        let counting = CountingRelay(relay)
        let engine = try #require(try await SyncEngine.open(device: members[1].fixture.device) { _ in counting })
        let report = try await engine.sync()
        #expect(report.rejectedCount == 1_000)
        #expect(counting.pulls.withLock { $0[.membership] } == 2, "one at the start of the pass, one for the generations it did not know")
    }

    @Test("a batch the relay hides from one member shows as a gap in that member's view of its author, until it arrives")
    func withholding() async throws {
        let relay = MemoryRelay()
        var phone = try Member("phone", seed: 1)
        var tablet = try Member("tablet", seed: 2)
        var laptop = try Member("laptop", seed: 3)
        let laptopView = WithholdingRelay(relay)
        phone.engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: relay)
        tablet.engine = try await join(tablet, sponsor: phone, relay)
        laptop.engine = try await join(laptop, sponsor: phone, laptopView)
        let circle = await phone.engine.circle
        let phoneKey = try #require(await phone.engine.signingKey)

        for account in ["one", "revoked", "three"] {
            _ = try phone.keychain.add(.password(account: account, synchronizable: true))
            _ = try await phone.engine.sync()
        }
        let batches = relay.records(circle, .envelopes)
        #expect(batches.count == 3)
        laptopView.hidden.withLock { $0 = [batches[1]] }
        try await settle([tablet, laptop])
        let tabletChain = try #require(await tablet.engine.received.chain(of: phoneKey))
        let laptopChain = try #require(await laptop.engine.received.chain(of: phoneKey))
        #expect(tabletChain.missing.isEmpty)
        #expect(laptopChain.missing == [2...2])
        #expect(laptopChain.head.sequence == 3)
        #expect(laptopChain.head == tabletChain.head, "both saw the same head, so only the gap tells")

        // The relay serves it after all: the gap closes, and the item arrives.
        laptopView.hidden.withLock { $0 = [] }
        relay.replay(batches[1], circle, .envelopes)
        _ = try await laptop.engine.sync()
        let filled = try #require(await laptop.engine.received.chain(of: phoneKey))
        #expect(filled.missing.isEmpty)
        #expect(try laptop.keychain.copy(.password(account: "revoked", synchronizable: .yes)).count == 1)
    }

    @Test("gaps are kept per author as ranges, bounded, and filled one sequence at a time")
    func chainsBookkeeping() {
        let author = SigningKey(seed: SymmetricKey()).publicKey
        func link(_ n: UInt64) -> BatchLink { BatchLink(sequence: n, digest: [UInt8](repeating: UInt8(n % 256), count: 32)) }
        var chains = AuthorChains()
        chains.receive(link(1), from: author)
        chains.receive(link(5), from: author)
        #expect(chains.chain(of: author)?.missing == [2...4])
        chains.receive(link(3), from: author)
        #expect(chains.chain(of: author)?.missing == [2...2, 4...4])
        chains.receive(link(3), from: author)
        #expect(chains.chain(of: author)?.missing == [2...2, 4...4], "a batch seen again changes nothing")
        chains.receive(link(UInt64.max), from: author)
        #expect(chains.chain(of: author)?.missing.last == 6...(UInt64.max - 1), "a huge jump is one range, not billions of entries")

        var many = AuthorChains()
        for n in stride(from: UInt64(1), through: 201, by: 2) { many.receive(link(n), from: author) }
        #expect(many.chain(of: author)?.missing.count == AuthorChains.maximumGaps)
        #expect(many.chain(of: author)?.missing.first?.lowerBound == 2, "the oldest gaps merge; none is forgotten")
    }
}
