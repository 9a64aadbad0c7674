package import Foundation
import KeychainModel
package import KeychainStore
import KeyferryCrypto
package import SyncWire

/// What a device that asked to join has heard back.
package enum JoinAnswer: Sendable {
    case pending
    case approved(Voucher)
    /// A member declined; its name when the joiner can tell.
    case declined(by: String)
    case expired
}

/// Joining from another machine, through the relay alone (Protocol/sync.md, "Joining from
/// another machine"): the device publishes a request signed by itself; a member lists the
/// pending ones, compares the code, and answers with a voucher or a decline on the same stream.
extension SyncEngine {
    /// Publishes this device's request to join `circle`, once the relay shows that circle (its
    /// history verifies, so the relay cannot pass off a circle of its own). The request grants
    /// nothing; the device holds nothing of the circle until a member's voucher arrives.
    package static func requestToJoin(
        circle: UUID, relay: URL, name: String, lifetime: TimeInterval, device: Device, transport: any RelayTransport
    ) async throws -> JoinRequest {
        try await requireNoCircle(device)
        let (history, _) = try await relayHistory(circle, at: relay, transport)
        let identity = try await device.run { try SyncSecrets.identity(of: $0) }
        guard !history.isMember(identity.signingKey.publicKey) else {
            throw CircleError(
                .alreadyInCircle,
                "\(device.info.name) is a member of circle \(circle) already, but holds none of its keys (a join cut short): "
                    + "a member's voucher for it finishes the join")
        }
        let request = try JoinRequest(circle: circle, name: name, identity: identity, made: device.now, lifetime: lifetime)
        try await transport.push([request.bytes], circle: circle, stream: .joins, proof: nil)
        return request
    }

    /// Reads the circle's `joins` stream for a member's answer to `request`. A voucher or
    /// decline that no member signed (a relay may plant anything) is passed over: the device
    /// goes on waiting for a real one, and `join` checks the voucher whole before it publishes.
    package static func answer(to request: JoinRequest, device: Device, transport: any RelayTransport) async throws -> JoinAnswer {
        guard !request.hasExpired(at: device.now) else { return .expired }
        let records = try await joinRecords(request.circle, transport)
        let answers = records.filter { record in
            switch record {
            case .voucher(let voucher): voucher.request == request.digest && voucher.share.recipient == request.peer.sealing && voucher.isSignedBySponsor
            case .decline(let decline): decline.request == request.digest && decline.isSigned
            case .request: false
            }
        }
        guard !answers.isEmpty else { return .pending }
        let (history, _) = try await relayHistory(request.circle, at: nil, transport)
        for answer in answers {
            switch answer {
            // One made stale by another change meanwhile is renewed by its sponsor (`renewApprovals`).
            case .voucher(let voucher) where history.isMember(voucher.sponsor) && isCurrent(voucher, in: history): return .approved(voucher)
            case .decline(let decline) where history.isMember(decline.signer): return .declined(by: history.members[decline.signer]!.name)
            default: continue
            }
        }
        return .pending
    }

    /// The requests a member may answer: unexpired by this device's clock, from devices that
    /// are not members, not answered yet; the newest of each device's.
    package func joinRequests() async throws -> [JoinRequest] {
        try await exclusively { try await pendingRequests() }
    }

    private func pendingRequests() async throws -> [JoinRequest] {
        let identity = try await identity()
        try await pullMembership()
        try requireMembership(identity)
        let records = try await Self.joinRecords(circle, transport)
        var answered = Set<[UInt8]>()
        for record in records {
            switch record {
            case .voucher(let voucher) where voucher.isSignedBySponsor && history.isMember(voucher.sponsor): answered.insert(voucher.request)
            case .decline(let decline) where decline.isSigned && history.isMember(decline.signer): answered.insert(decline.request)
            default: continue
            }
        }
        let now = device.now
        var newest: [SigningPublicKey: JoinRequest] = [:]
        for case .request(let request) in records
        where request.circle == circle && !request.hasExpired(at: now) && !answered.contains(request.digest) && !history.isMember(request.peer.signing) {
            if let held = newest[request.peer.signing], held.made >= request.made { continue }
            newest[request.peer.signing] = request
        }
        return newest.values.sorted { ($0.made, $0.peer.name) < ($1.made, $1.peer.name) }
    }

    /// Approves the pending request whose device shows `code`: publishes a voucher for it on
    /// the `joins` stream. The device joins when it reads it. A code two devices' requests
    /// share is refused (a stranger may have made keys to match it): decline both.
    package func approve(code: JoinCode) async throws -> JoinRequest {
        try await exclusively { try await approveRequest(code) }
    }

    private func approveRequest(_ code: JoinCode) async throws -> JoinRequest {
        let matching = try await pendingRequests().filter { $0.code == code }
        guard let request = matching.first else { throw try await noSuchRequest(code) }
        guard matching.count == 1 else {
            throw CircleError(
                .ambiguousRequest,
                "\(matching.count) devices' pending requests show code \(code) (\(matching.map(\.peer.name).joined(separator: ", "))): "
                    + "one may be a stranger's made to match; decline them, and ask the device to request again")
        }
        let voucher = try await makeVoucher(for: request.peer, answering: request)
        try await push([voucher.bytes], to: .joins, as: try await identity())
        return request
    }

    /// Declines the pending requests whose device shows `code` (every one, when two share it).
    package func decline(code: JoinCode) async throws -> [JoinRequest] {
        try await exclusively {
            let identity = try await identity()
            let requests = try await pendingRequests().filter { $0.code == code }
            guard !requests.isEmpty else { throw try await noSuchRequest(code) }
            try await push(
                requests.map { JoinDecline(circle: circle, request: $0.digest, signer: identity.signingKey).bytes }, to: .joins, as: identity)
            return requests
        }
    }

    /// Whether `voucher` admits into the circle as it is now: its entry takes the next place
    /// (or its device is a member already), and its newest share is of the current generation.
    static func isCurrent(_ voucher: Voucher, in history: CircleHistory) -> Bool {
        guard voucher.share.epoch == history.epoch else { return false }
        guard let entry = voucher.entry else { return history.members.values.contains { $0.sealing == voucher.share.recipient } }
        return Int(entry.sequence) == history.entries.count && entry.previous == ContentDigest.of(history.entries.last!.bytes)
    }

    /// Approves again what this member approved and a change of the circle made stale before
    /// the device joined (two devices approved from one state of the circle: the first to join
    /// takes the place the other's voucher names). The member's word stands while the request
    /// does: unexpired, its device not a member, no current voucher for it.
    func renewApprovals(_ identity: DeviceIdentity) async throws {
        let records = try await Self.joinRecords(circle, transport)
        let me = identity.signingKey.publicKey
        let now = device.now
        var vouchers: [[UInt8]: [Voucher]] = [:]
        for case .voucher(let voucher) in records where voucher.isSignedBySponsor { vouchers[voucher.request, default: []].append(voucher) }
        var renewed: [[UInt8]] = []
        for case .request(let request) in records where !request.hasExpired(at: now) && !history.isMember(request.peer.signing) {
            let answers = vouchers[request.digest] ?? []
            guard answers.contains(where: { $0.sponsor == me }), !answers.contains(where: { Self.isCurrent($0, in: history) }) else { continue }
            renewed.append(try await makeVoucher(for: request.peer, answering: request).bytes)
        }
        if !renewed.isEmpty { try await push(renewed, to: .joins, as: identity) }
    }

    private func noSuchRequest(_ code: JoinCode) async throws -> CircleError {
        let pending = try await pendingRequests()
        let listing = pending.isEmpty ? "none is pending" : "pending: " + pending.map { "\($0.code) (\($0.peer.name))" }.joined(separator: ", ")
        return CircleError(.noSuchRequest, "no pending join request of circle \(circle) shows code \(code); \(listing)")
    }

    /// The circle's membership as the relay at `relay` shows it, verified from its first entry,
    /// and the cursor of its last entry: what a device outside the circle checks before it
    /// trusts anything else the relay says of it.
    static func relayHistory(_ circle: UUID, at relay: URL?, _ transport: any RelayTransport) async throws -> (CircleHistory, UInt64) {
        let log = try await transport.pull(circle: circle, stream: .membership, after: 0, limit: 10_000)
        guard let last = log.last else {
            throw CircleError(.unknownCircle, "the relay\(relay.map { " at \($0.absoluteString)" } ?? "") knows no circle \(circle)")
        }
        return (try CircleHistory.reading(log.map(\.body), circle: circle).history, last.cursor)
    }

    /// Every join record the relay holds for the circle; what does not parse is passed over.
    private static func joinRecords(_ circle: UUID, _ transport: any RelayTransport) async throws -> [JoinRecord] {
        var records: [JoinRecord] = []
        var cursor: UInt64 = 0
        for _ in 0..<maximumJoinPages {
            let page = try await transport.pull(circle: circle, stream: .joins, after: cursor, limit: 10_000)
            guard let last = page.last else { break }
            records += page.compactMap { try? JoinRecord(bytes: $0.body) }.filter { $0.circle == circle }
            cursor = last.cursor
        }
        return records
    }

    /// Pages of the `joins` stream read at most: the relay keeps few records there, and a relay
    /// that serves more cannot keep a member reading for ever.
    private static let maximumJoinPages = 4
}
