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

/// A relay in this process that checks what it keeps, on a clock the test moves (the devices'
/// clocks start where it does).
private final class CheckingRelay: Sendable {
    let directory: URL = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-joins-\(UUID().uuidString)")
    let clock: ManualClock
    let relay: LocalRelay
    let storage: SQLiteRelayStorage

    init() throws {
        let storage = try SQLiteRelayStorage(directory: directory)
        let clock = ManualClock()
        self.storage = storage
        self.clock = clock
        relay = LocalRelay(storage: storage, now: { clock.now() })
    }

    func advance(by seconds: TimeInterval) { clock.advance(by: seconds) }
    deinit { try? FileManager.default.removeItem(at: directory) }

    func records(_ circle: UUID, _ stream: RelayStream) async throws -> [[UInt8]] {
        try await storage.records(circle: circle, stream: stream, after: 0, limit: 10_000).map(\.body)
    }

    /// The phone, which creates a circle through this relay, and the circle.
    func founder() async throws -> (Member, UUID) {
        var phone = try Member("phone", seed: 1)
        phone.engine = try await SyncEngine.create(device: phone.fixture.device, name: "phone", relay: Member.relayURL, transport: relay)
        return (phone, await phone.engine.circle)
    }

    /// `member` asks to join `circle`, named after itself.
    func ask(_ member: Member, _ circle: UUID, lifetime: TimeInterval = 600) async throws -> JoinRequest {
        try await SyncEngine.requestToJoin(
            circle: circle, relay: Member.relayURL, name: member.name, lifetime: lifetime, device: member.fixture.device, transport: relay)
    }

    /// What `member` hears back about `request`.
    func answer(_ request: JoinRequest, _ member: Member) async throws -> JoinAnswer {
        try await SyncEngine.answer(to: request, device: member.fixture.device, transport: relay)
    }
}

@Suite("Joining through the relay")
struct JoinRequestTests {
    @Test("a device asks through the relay alone, holds nothing until a member approves its code, then both sync both ways")
    func askAndApprove() async throws {
        let relay = try CheckingRelay()
        let (phone, circle) = try await relay.founder()
        var tablet = try Member("tablet", seed: 2)

        let request = try await relay.ask(tablet, circle)
        guard case .pending = try await relay.answer(request, tablet) else {
            Issue.record("answered before any member did")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: tablet.fixture.device.directory.appendingPathComponent("sync.json").path))
        #expect(try await relay.records(circle, .membership).count == 1, "asking publishes no membership entry")

        let pending = try await phone.engine.joinRequests()
        #expect(pending.map(\.peer.name) == ["tablet"] && pending.first?.code == request.code)
        #expect(request.code == JoinCode(try await SyncEngine.peerIdentity(of: tablet.fixture.device, name: "any name")), "the code is the keys'")
        let approved = try await phone.engine.approve(code: JoinCode(typed: "\(request.code.digits.prefix(3))-\(request.code.digits.suffix(3))")!)
        #expect(approved == request)
        #expect(try await phone.engine.joinRequests().isEmpty, "an answered request is no longer pending")

        guard case .approved(let voucher) = try await relay.answer(request, tablet) else {
            Issue.record("the approval was not read")
            return
        }
        let sponsor = try SyncSecrets.identity(of: phone.fixture.device).signingKey.publicKey
        #expect(voucher.request == request.digest && voucher.sponsor == sponsor)
        tablet.engine = try await SyncEngine.join(voucher, device: tablet.fixture.device, transport: relay.relay)
        _ = try phone.keychain.add(.password(account: "from-phone", value: "p", protection: .afterFirstUnlock, synchronizable: true))
        _ = try tablet.keychain.add(.password(account: "from-tablet", value: "t", protection: .afterFirstUnlock, synchronizable: true))
        try await settle([phone, tablet])
        for member in [phone, tablet] {
            let accounts =
                try member.keychain.copy(.password(account: "from-phone", synchronizable: .yes)).count
                + member.keychain.copy(.password(account: "from-tablet", synchronizable: .yes)).count
            #expect(accounts == 2, "\(member.name) holds both items")
        }
    }

    @Test("two devices approved from one state of the circle both join: the second waits while its voucher is stale, and the member renews it")
    func approvalsRenewed() async throws {
        let relay = try CheckingRelay()
        let (phone, circle) = try await relay.founder()
        let (tablet, laptop) = (try Member("tablet", seed: 2), try Member("laptop", seed: 3))
        var requests: [JoinRequest] = []
        for device in [tablet, laptop] {
            requests.append(
                try await relay.ask(device, circle))
        }
        for request in requests { _ = try await phone.engine.approve(code: request.code) }
        guard case .approved(let first) = try await relay.answer(requests[0], tablet) else {
            Issue.record("the tablet's approval was not read")
            return
        }
        _ = try await SyncEngine.join(first, device: tablet.fixture.device, transport: relay.relay)
        guard case .pending = try await relay.answer(requests[1], laptop) else {
            Issue.record("the laptop took a voucher the tablet's join made stale")
            return
        }
        _ = try await phone.engine.sync()
        guard case .approved(let renewed) = try await relay.answer(requests[1], laptop) else {
            Issue.record("the phone did not renew its approval")
            return
        }
        let joined = try await SyncEngine.join(renewed, device: laptop.fixture.device, transport: relay.relay)
        #expect(await joined.members.map(\.name) == ["laptop", "phone", "tablet"])
    }

    @Test("a declined request stops the device with the member's name; an expired one is neither listed, approved nor waited on")
    func declineAndExpiry() async throws {
        let relay = try CheckingRelay()
        let (phone, circle) = try await relay.founder()
        let tablet = try Member("tablet", seed: 2)
        let ask = {
            try await relay.ask(tablet, circle, lifetime: 60)
        }

        let first = try await ask()
        #expect(try await phone.engine.decline(code: first.code).map(\.digest) == [first.digest])
        guard case .declined(let by) = try await relay.answer(first, tablet) else {
            Issue.record("the decline was not read")
            return
        }
        #expect(by == "phone")

        let second = try await ask()
        phone.fixture.clock.advance(by: 61)
        #expect(try await phone.engine.joinRequests().isEmpty, "expired by the member's clock")
        let late = await #expect(throws: CircleError.self) { try await phone.engine.approve(code: second.code) }
        #expect(late?.code == .noSuchRequest)
        tablet.fixture.clock.advance(by: 61)
        guard case .expired = try await relay.answer(second, tablet) else {
            Issue.record("the device went on waiting past its request's expiry")
            return
        }
        // The relay lets it go once its own clock has passed it, at the next push.
        relay.advance(by: 61)
        let third = try await relay.ask(tablet, circle)
        let held = try await relay.records(circle, .joins).map { try JoinRecord(bytes: $0) }
        #expect(held == [.request(third)], "expired requests and their answers are let go: \(held.count) held")
    }

    @Test("forged approvals, replayed vouchers and strangers' answers are refused by name, and change nothing on any member or the relay")
    func forgeriesAndReplays() async throws {
        let relay = try CheckingRelay()
        let (phone, circle) = try await relay.founder()
        let tablet = try Member("tablet", seed: 2)
        let request = try await relay.ask(tablet, circle)
        let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let history = await phone.engine.history
        let keys = CircleKeys(circle: circle, epoch: 1)
        let strangersVoucher = Voucher(
            circle: circle, relay: Member.relayURL, head: ContentDigest.of(history.entries.last!.bytes), request: request.digest,
            entry: MembershipEntry(.join, subject: request.peer, after: history, signer: stranger.signingKey),
            shares: [CircleKeyShare(keys, to: request.peer.sealing, from: stranger.signingKey)], sponsor: stranger.signingKey)
        let strangersDecline = JoinDecline(circle: circle, request: request.digest, signer: stranger.signingKey)
        let before = try await relay.records(circle, .joins)

        // The relay refuses a stranger's answers, signed or not.
        for record in [strangersVoucher.bytes, strangersDecline.bytes] {
            for proof in [nil, PushProof(signing: [record], circle: circle, stream: .joins, key: stranger.signingKey)] {
                await #expect(throws: RelayError.self) { try await relay.relay.push([record], circle: circle, stream: .joins, proof: proof) }
            }
        }
        #expect(try await relay.records(circle, .joins) == before)

        // A relay that plants them anyway (it is not trusted) makes the device wait on, not join.
        _ = try await relay.storage.append([strangersVoucher.bytes, strangersDecline.bytes], circle: circle, stream: .joins)
        guard case .pending = try await relay.answer(request, tablet) else {
            Issue.record("a stranger's answer was taken")
            return
        }
        #expect(try await phone.engine.joinRequests().map(\.digest) == [request.digest], "a stranger's answer answers nothing")
        let planted = await #expect(throws: CircleError.self) {
            try await SyncEngine.join(strangersVoucher, device: tablet.fixture.device, transport: relay.relay)
        }
        #expect(planted?.code == .forged)

        // An edited voucher, from a real member, is forged too: every byte is signed.
        let real = try await phone.engine.makeVoucher(for: request.peer, answering: request)
        var edited = real.bytes
        edited[30] ^= 1
        if let tampered = try? Voucher(bytes: edited) {
            let refusal = await #expect(throws: CircleError.self) {
                try await SyncEngine.join(tampered, device: tablet.fixture.device, transport: relay.relay)
            }
            #expect(refusal?.code == .forged)
        }
        let membership = try await relay.records(circle, .membership)
        #expect(membership.count == 1, "nothing was published")
        #expect(!FileManager.default.fileExists(atPath: tablet.fixture.device.directory.appendingPathComponent("sync.json").path))

        // The real voucher admits once; used again after the device left, it is stale.
        var joined = try await SyncEngine.join(real, device: tablet.fixture.device, transport: relay.relay)
        try await joined.leave(force: false)
        let afterLeaving = try await relay.records(circle, .membership)
        let replay = await #expect(throws: CircleError.self) { try await SyncEngine.join(real, device: tablet.fixture.device, transport: relay.relay) }
        #expect(replay?.code == .staleVoucher, "\(String(describing: replay))")
        #expect(try await relay.records(circle, .membership) == afterLeaving)
        joined = try await SyncEngine.join(
            try await phone.engine.vouch(for: request.peer), device: tablet.fixture.device, transport: relay.relay)
        #expect(await joined.members.map(\.name) == ["phone", "tablet"], "a new voucher admits it again")
    }

    @Test("anyone may ask, and only so much: the relay holds 64 pending requests per circle, and refuses requests from members or of another circle")
    func boundedAsking() async throws {
        let relay = try CheckingRelay()
        let (phone, circle) = try await relay.founder()
        let made = relay.clock.now()
        func request(lifetime: TimeInterval = 60, in circle: UUID = circle, identity: DeviceIdentity? = nil) throws -> JoinRequest {
            try JoinRequest(
                circle: circle, name: "stranger", identity: identity ?? DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()),
                made: made, lifetime: lifetime)
        }
        _ = try await relay.relay.push(try (0..<RelayKeeper.pendingJoinRequests).map { _ in try request().bytes }, circle: circle, stream: .joins, proof: nil)
        let full = await #expect(throws: RelayError.self) { try await relay.relay.push([try request().bytes], circle: circle, stream: .joins, proof: nil) }
        #expect("\(full!)".contains("64 pending join requests"))
        #expect(try await phone.engine.joinRequests().count == RelayKeeper.pendingJoinRequests)
        relay.advance(by: 61)
        _ = try await relay.relay.push([try request(lifetime: 600).bytes], circle: circle, stream: .joins, proof: nil)
        #expect(try await relay.records(circle, .joins).count == 1, "the expired requests went")

        let memberIdentity = try SyncSecrets.identity(of: phone.fixture.device)
        let fromMember = try JoinRequest(circle: circle, name: "phone", identity: memberIdentity, made: relay.clock.now(), lifetime: 60)
        await #expect(throws: RelayError.self) { try await relay.relay.push([fromMember.bytes], circle: circle, stream: .joins, proof: nil) }
        await #expect(throws: RelayError.self) {
            try await relay.relay.push([try request(in: UUID()).bytes], circle: circle, stream: .joins, proof: nil)
        }
        await #expect(throws: RelayError.self) { try await relay.relay.push([[0x4b, 0x46, 0x4a, 0x52, 1]], circle: circle, stream: .joins, proof: nil) }
        // A request made by a clock far ahead would hold its place for ever.
        let ahead = try JoinRequest(
            circle: circle, name: "ahead", identity: DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()),
            made: relay.clock.now().addingTimeInterval(86_400), lifetime: 60)
        let refused = await #expect(throws: RelayError.self) { try await relay.relay.push([ahead.bytes], circle: circle, stream: .joins, proof: nil) }
        #expect("\(refused!)".contains("hours after this relay's clock"))
        #expect(throws: CircleError.self) { try request(lifetime: 3_601) }
    }

    @Test("join records read as hostile input: every edited byte, a cut, a trailing byte or another format is refused")
    func hostileRecords() throws {
        let identity = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let request = try JoinRequest(circle: UUID(), name: "tablet", identity: identity, made: Date(), lifetime: 600)
        let decline = JoinDecline(circle: request.circle, request: request.digest, signer: identity.signingKey)
        #expect(try JoinRecord(bytes: request.bytes) == .request(request))
        #expect(try JoinRecord(bytes: decline.bytes) == .decline(decline))
        for index in request.bytes.indices {
            var edited = request.bytes
            edited[index] ^= 0x01
            #expect(throws: EnvelopeError.self) { try JoinRequest(bytes: edited) }
        }
        // Times no clock makes, as a stranger may write them: refused, never a trap.
        let timesAt = 4 + 1 + 16 + 4 + "tablet".utf8.count + 64
        for field in [timesAt, timesAt + 8] {
            var far = request.bytes
            far.replaceSubrange(field..<field + 8, with: [UInt8](repeating: 0xff, count: 8))
            #expect(throws: EnvelopeError.self) { try JoinRequest(bytes: far) }
        }
        for index in decline.bytes.indices {
            var edited = decline.bytes
            edited[index] ^= 0x01
            #expect((try? JoinDecline(bytes: edited))?.isSigned != true)
        }
        for bytes in [request.bytes, decline.bytes] {
            for cut in [0, 3, 5, bytes.count / 2, bytes.count - 1] {
                #expect(throws: EnvelopeError.self) { try JoinRecord(bytes: Array(bytes.prefix(cut))) }
            }
            #expect(throws: EnvelopeError.self) { try JoinRecord(bytes: bytes + [0]) }
            var other = bytes
            other[4] = 2
            #expect(throws: EnvelopeError.unsupportedFormat(2)) { try JoinRecord(bytes: other) }
        }
        #expect(JoinCode(typed: "123 456")?.digits == "123456" && JoinCode(typed: "12345") == nil && JoinCode(typed: "12345x") == nil)
    }
}

@Suite("Joining after a removal")
struct JoinAfterRemovalTests {
    @Test("a device that joins after a removal opens the items last written under the earlier generation; the removed member's batches stay refused")
    func earlierGenerations() async throws {
        let relay = MemoryRelay()
        var members = try await circleOfThree(relay)
        _ = try members[0].keychain.add(.password(account: "untouched", value: "before", protection: .afterFirstUnlock, synchronizable: true))
        _ = try members[2].keychain.add(.password(account: "by-laptop", value: "laptop's", protection: .afterFirstUnlock, synchronizable: true))
        try await settle(members)
        try await members[0].engine.remove("laptop")
        members.removeLast()
        try await settle(members)
        #expect(await members[1].engine.epoch == 2)

        var newcomer = try Member("newcomer", seed: 4)
        newcomer.engine = try await join(newcomer, sponsor: members[1], relay)
        let reports = try await settle(members + [newcomer])
        let untouched = try newcomer.keychain.copy(.password(account: "untouched", synchronizable: .yes))
        #expect(untouched.first?.data == Data("before".utf8), "the generation 1 item opens with the voucher's earlier share")
        // The removed laptop's own batches are refused by a device that joins after (sync.md,
        // "Joining after a removal"): its item reaches the newcomer once a member writes it again.
        let refused = reports.flatMap(\.rejected)
        #expect(!refused.isEmpty && refused.allSatisfy { $0.reason == .notAMember }, "\(refused)")
        #expect(throws: KeychainError.self) { try newcomer.keychain.copy(.password(account: "by-laptop", synchronizable: .yes)) }
        _ = try members[1].keychain.update(.password(account: "by-laptop", synchronizable: .yes), with: ItemChanges(data: Data("rewritten".utf8)))
        try await settle(members + [newcomer])
        #expect(try newcomer.keychain.copy(.password(account: "by-laptop", synchronizable: .yes)).first?.data == Data("rewritten".utf8))
    }
}
