package import Foundation
import KeychainModel
import KeyferryCrypto
import KeyferryThreads
package import SyncWire

/// Why a relay refused a push, with the HTTP status that says it.
package struct RelayRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        /// Not records of the stream, or for another circle.
        case malformed
        /// No member's signature on a push that needs one.
        case unsigned
        /// Signed by a device that is not a member, or a record no member could have made.
        case forbidden
        /// A membership entry that does not extend the circle's history (another took its place).
        case conflict
        /// The circle holds its quota.
        case full
        /// A new circle without an admission token the relay holds (`RelayAdmission`).
        case unadmitted
        /// A pull from before deletions the relay let go: the member reads from the start.
        case resyncNeeded
    }

    package var kind: Kind
    package var reason: String

    package init(kind: Kind, reason: String) {
        self.kind = kind
        self.reason = reason
    }

    package var description: String { reason }
}

/// What a relay keeps and refuses: the checks of Protocol/relay.md, for the server and
/// for a relay in the process alike. It holds no key, yet it knows each circle's membership,
/// since every entry is public and signed: it keeps a membership entry only when it extends the
/// history, and `keys` and `envelopes` records only from a member (a push signed by one,
/// `PushProof`), so a stranger cannot write to a circle at all, and each circle's bytes stay
/// within the relay's `RelayLimits`.
///
/// Signature checks and history verification are CPU work: they run on the process's pool for
/// blocking work (`BlockingPool`), so a burst of pushes does not hold up its other tasks.
package actor RelayKeeper {
    /// A circle's membership as read from storage, up to `cursor`: a cache, brought up to date
    /// on every push, since other relays may share the storage.
    private struct KnownCircle: Sendable {
        var history: CircleHistory
        /// The membership log is read up to here.
        var cursor: UInt64
    }

    package let storage: any RelayStorage
    package let limits: RelayLimits
    package let admission: RelayAdmission
    /// The relay's clock, for how long a member has been away (tests move it).
    private let now: @Sendable () -> Date
    /// Circles recently pushed to, with when each was last used: at most `cachedCircles`, the
    /// least recently used going first (it is read again from storage when next pushed to), so
    /// memory does not grow with the circles a relay has seen.
    private var circles: [UUID: (known: KnownCircle, used: UInt64)] = [:]
    private var uses: UInt64 = 0
    private let cachedCircles: Int

    package init(
        storage: any RelayStorage, limits: RelayLimits = RelayLimits(), admission: RelayAdmission = .open, cachedCircles: Int = 1_024,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.storage = storage
        self.limits = limits
        self.admission = admission
        self.now = now
        self.cachedCircles = cachedCircles
    }

    /// How many circles' memberships are held in memory.
    package var cachedCircleCount: Int { circles.count }

    /// Checks and keeps a push; returns how many records were new. A membership push is
    /// appended only if no entry arrived since it was checked (another relay of the same
    /// storage may have admitted one); then it is checked again. `token` is the pusher's
    /// admission token, asked for only when the push creates a circle.
    package func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?, token: String? = nil) async throws -> Int {
        let limit = stream == .membership || stream == .joins ? RelayWire.maximumMembershipRecordBytes : RelayWire.maximumRecordBytes
        if let big = bodies.first(where: { $0.count > limit }) {
            throw RelayRefusal(kind: .malformed, reason: "a \(stream.rawValue) record of \(big.count) bytes exceeds the \(limit)-byte limit")
        }
        for _ in 0..<Self.membershipAttempts {
            var known = try await self.known(circle)
            var facts: [BatchFacts]?
            switch stream {
            case .membership:
                if known == nil { try admission.check(token, circle: circle) }
                known = try await BlockingPool.shared.run { [known] _ in try Self.admitEntries(bodies, circle: circle, known: known) }
            case .keys, .envelopes:
                guard let known else { throw RelayRefusal(kind: .forbidden, reason: "there is no circle \(circle) on this relay") }
                facts = try await BlockingPool.shared.run { _ in
                    try Self.checkSigned(bodies, circle: circle, stream: stream, proof: proof, history: known.history)
                }
            case .joins:
                guard let known else { throw RelayRefusal(kind: .forbidden, reason: "there is no circle \(circle) on this relay") }
                try await checkJoins(bodies, circle: circle, proof: proof, history: known.history)
            }
            do {
                let added = try await storage.append(
                    bodies, facts: facts, circle: circle, stream: stream, ifLastIs: stream == .membership ? known?.cursor ?? 0 : nil, within: limits)
                if stream == .membership, let known { remember(circle, known) }
                if stream == .keys, added > 0, let known { try await dropUnneededKeys(circle, known.history) }
                return added
            } catch is RelayStorageConflict {
                continue
            } catch let full as RelayStorageFull {
                throw RelayRefusal(kind: .full, reason: full.reason)
            }
        }
        throw RelayRefusal(kind: .conflict, reason: "circle \(circle)'s membership kept changing while the push was checked; pull it and push again")
    }

    /// How many times a membership push is checked again when entries keep arriving meanwhile.
    private static let membershipAttempts = 8

    /// The records after `cursor`; a pull of `envelopes` from before deletions the relay let go
    /// (other than from the start) is refused, so that the member knows to resync.
    package func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        guard stream == .envelopes, cursor > 0 else { return try await storage.records(circle: circle, stream: stream, after: cursor, limit: limit) }
        let (records, floor) = try await storage.envelopes(circle: circle, after: cursor, limit: limit)
        guard cursor >= floor else {
            throw RelayRefusal(
                kind: .resyncNeeded,
                reason: "circle \(circle) let go of deletions after cursor \(cursor) that this member had not acknowledged "
                    + "(it was away longer than the relay keeps them); read its envelopes again from the start")
        }
        return records
    }

    /// Keeps a member's acknowledgement of the circle's envelopes through `cursor`, signed by
    /// it, and lets go of the deletions every member has seen (`RelayStorage.acknowledge`).
    package func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws {
        guard let known = try await known(circle) else { throw RelayRefusal(kind: .forbidden, reason: "there is no circle \(circle) on this relay") }
        guard known.history.isMember(proof.signer), proof.holds(acknowledging: cursor, circle: circle) else {
            throw RelayRefusal(kind: .forbidden, reason: "the acknowledgement is not signed by a member of circle \(circle)")
        }
        try await storage.acknowledge(
            circle: circle, member: proof.signer.bytes, through: cursor, members: known.history.members.keys.map(\.bytes),
            retention: limits.retention, now: now())
        try await dropUnneededKeys(circle, known.history)
    }

    /// Lets go of key records no member can need: a generation's before the current one when
    /// no newest version is sealed under it, and shares sealed to devices that are no longer
    /// members. The current generation's records always stay.
    private func dropUnneededKeys(_ circle: UUID, _ history: CircleHistory) async throws {
        guard history.epoch > 1, let live = try await storage.liveGenerations(circle: circle) else { return }
        let members = Set(history.members.values.map(\.sealing))
        var unneeded: [UInt64] = []
        var cursor: UInt64 = 0
        while true {
            let page = try await storage.records(circle: circle, stream: .keys, after: cursor, limit: RelayWire.maximumPullRecords)
            guard let last = page.last else { break }
            for record in page {
                guard let key = try? KeyRecord(bytes: record.body), key.epoch < history.epoch else { continue }
                let needed =
                    switch key {
                    case .classKeys: live.contains(key.epoch)
                    case .share(let share): live.contains(key.epoch) && members.contains(share.recipient)
                    }
                if !needed { unneeded.append(record.cursor) }
            }
            cursor = last.cursor
        }
        if !unneeded.isEmpty { try await storage.remove(circle: circle, stream: .keys, cursors: unneeded) }
    }

    /// The circle as held: its history read from the stored log (what does not extend it is
    /// passed over, as members pass it over). Nil when the relay holds none of it.
    private func known(_ circle: UUID) async throws -> KnownCircle? {
        var known = circles[circle]?.known
        var cursor = known?.cursor ?? 0
        var read: [[UInt8]] = []
        while true {
            let page = try await storage.records(circle: circle, stream: .membership, after: cursor, limit: RelayWire.maximumPullRecords)
            read += page.map(\.body)
            guard let last = page.last else { break }
            cursor = last.cursor
        }
        if !read.isEmpty {
            known = try await BlockingPool.shared.run { [known, read, cursor] _ in
                if var held = known {
                    _ = held.history.extend(with: read)
                    held.cursor = cursor
                    return held
                }
                guard let (history, _) = try? CircleHistory.reading(read, circle: circle) else { return nil }
                return KnownCircle(history: history, cursor: cursor)
            }
        }
        // Another push may have moved the cache further meanwhile: the newest read wins.
        if let known, known.cursor >= circles[circle]?.known.cursor ?? 0 { remember(circle, known) }
        return known
    }

    private func remember(_ circle: UUID, _ known: KnownCircle) {
        uses += 1
        circles[circle] = (known, uses)
        if circles.count > cachedCircles, let oldest = circles.min(by: { $0.value.used < $1.value.used })?.key {
            circles[oldest] = nil
        }
    }

    /// Every entry must extend the history (or be one it holds already); the first of a new
    /// circle must create it, under the id its creator's key makes.
    private static func admitEntries(_ bodies: [[UInt8]], circle: UUID, known: KnownCircle?) throws -> KnownCircle? {
        var history = known?.history
        for body in bodies {
            do {
                let entry = try MembershipEntry(bytes: body)
                if let held = history, Int(entry.sequence) < held.entries.count, held.entries[Int(entry.sequence)].bytes == body { continue }
                if history == nil {
                    let created = try CircleHistory(verifying: [entry])
                    guard created.circle == circle else { throw CircleError(.invalidHistory, "the entry creates another circle") }
                    history = created
                } else {
                    try history!.append(entry)
                }
            } catch let error as CircleError {
                throw RelayRefusal(kind: history == nil ? .forbidden : .conflict, reason: "\(error)")
            }
        }
        guard let history else { return nil }
        return KnownCircle(history: history, cursor: known?.cursor ?? 0)
    }

    /// `keys` and `envelopes` records come from a member: the push is signed by one (for `keys`,
    /// also the author of the current generation, who may have just left), every key record by
    /// its generation's author, every batch by the pusher. Returns, for batches, what
    /// compaction reads of their headers.
    private static func checkSigned(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?, history: CircleHistory) throws
        -> [BatchFacts]?
    {
        guard let proof else {
            throw RelayRefusal(
                kind: .unsigned, reason: "a push to \(stream.rawValue) is signed by a member of the circle (Keyferry-Signer, Keyferry-Signature)")
        }
        let mayPush = history.isMember(proof.signer) || (stream == .keys && history.generationAuthors[history.epoch] == proof.signer)
        guard mayPush, proof.holds(for: bodies, circle: circle, stream: stream) else {
            throw RelayRefusal(kind: .forbidden, reason: "the push is not signed by a member of circle \(circle)")
        }
        var facts: [BatchFacts] = []
        for body in bodies {
            switch stream {
            case .keys:
                let record: KeyRecord
                do { record = try KeyRecord(bytes: body) } catch { throw RelayRefusal(kind: .malformed, reason: "a record is not a key record: \(error)") }
                guard let author = history.generationAuthors[record.epoch] else {
                    throw RelayRefusal(kind: .forbidden, reason: "a key record for generation \(record.epoch), which no membership entry started")
                }
                let signed =
                    switch record {
                    case .classKeys(let keys): keys.isSigned(by: author, circle: circle)
                    case .share(let share): share.isSigned(by: author, circle: circle)
                    }
                guard signed else {
                    throw RelayRefusal(kind: .forbidden, reason: "a key record of generation \(record.epoch) not signed by the member who made it")
                }
            case .envelopes:
                guard let batch = try? EnvelopeBatch(bytes: body) else { throw RelayRefusal(kind: .malformed, reason: "a record is not a batch of envelopes") }
                guard batch.circle == circle, batch.author == proof.signer else {
                    throw RelayRefusal(kind: .forbidden, reason: "a batch of envelopes for another circle, or by another author than the pusher")
                }
                facts.append(BatchFacts(batch))
            case .membership, .joins:
                break
            }
        }
        return stream == .envelopes ? facts : nil
    }

    /// Unexpired join requests a circle may hold at once: a stranger may ask to join (asking
    /// is all a request does), but cannot fill the circle's reserve with asking.
    package static let pendingJoinRequests = 64
    /// How far after the relay's clock a request may expire: its lifetime (an hour at most)
    /// and an hour of a device's clock running ahead.
    package static let joinRequestHorizon: TimeInterval = 2 * 3_600

    /// `joins` records: a device's request, signed by itself, which anyone may push; a member's
    /// voucher or decline, answering a request the relay holds, in a push signed by that member.
    /// Before appending, lets go of requests that have expired, with their answers, and refuses
    /// a request past `pendingJoinRequests`.
    private func checkJoins(_ bodies: [[UInt8]], circle: UUID, proof: PushProof?, history: CircleHistory) async throws {
        var held: [(cursor: UInt64, record: JoinRecord)] = []
        var cursor: UInt64 = 0
        while true {
            let page = try await storage.records(circle: circle, stream: .joins, after: cursor, limit: RelayWire.maximumPullRecords)
            guard let last = page.last else { break }
            held += page.compactMap { record in (try? JoinRecord(bytes: record.body)).map { (record.cursor, $0) } }
            cursor = last.cursor
        }
        let now = now()
        var live = Set<[UInt8]>()
        var expired: [UInt64] = []
        for (cursor, record) in held {
            if case .request(let request) = record {
                if request.hasExpired(at: now) { expired.append(cursor) } else { live.insert(request.digest) }
            }
        }
        var answered = Set<[UInt8]>()
        for (cursor, record) in held {
            switch record {
            case .voucher(let voucher) where !live.contains(voucher.request): expired.append(cursor)
            case .decline(let decline) where !live.contains(decline.request): expired.append(cursor)
            case .voucher(let voucher): answered.insert(voucher.request)
            case .decline(let decline): answered.insert(decline.request)
            case .request: continue
            }
        }
        var asking = 0
        var answers = false
        for body in bodies {
            let record: JoinRecord
            do { record = try JoinRecord(bytes: body) } catch {
                throw RelayRefusal(kind: .malformed, reason: "a record is not a join request, voucher or decline: \(error)")
            }
            guard record.circle == circle else { throw RelayRefusal(kind: .forbidden, reason: "a join record for another circle than \(circle)") }
            switch record {
            case .request(let request):
                guard !history.isMember(request.peer.signing) else {
                    throw RelayRefusal(kind: .conflict, reason: "\(request.peer.name) is a member of circle \(circle) already")
                }
                guard !request.hasExpired(at: now) else { throw RelayRefusal(kind: .forbidden, reason: "the join request expired at \(request.expires)") }
                // Made by the device's clock, which may run ahead, but not so far that it holds a place for ever.
                guard request.expires.timeIntervalSince(now) <= Self.joinRequestHorizon else {
                    throw RelayRefusal(
                        kind: .forbidden,
                        reason:
                            "the join request expires at \(request.expires), more than \(Int(Self.joinRequestHorizon / 3_600)) hours after this relay's clock")
                }
                if !live.contains(request.digest) { asking += 1 }
            case .voucher(let voucher):
                answers = true
                guard history.isMember(voucher.sponsor), voucher.isSignedBySponsor else {
                    throw RelayRefusal(kind: .forbidden, reason: "a voucher not signed by a member of circle \(circle)")
                }
                guard live.contains(voucher.request) else { throw RelayRefusal(kind: .forbidden, reason: "a voucher answering no pending join request") }
            case .decline(let decline):
                answers = true
                guard history.isMember(decline.signer), decline.isSigned else {
                    throw RelayRefusal(kind: .forbidden, reason: "a decline not signed by a member of circle \(circle)")
                }
                guard live.contains(decline.request) else { throw RelayRefusal(kind: .forbidden, reason: "a decline answering no pending join request") }
            }
        }
        if answers {
            guard let proof else {
                throw RelayRefusal(kind: .unsigned, reason: "a voucher or decline is pushed by a member of the circle (Keyferry-Signer, Keyferry-Signature)")
            }
            guard history.isMember(proof.signer), proof.holds(for: bodies, circle: circle, stream: .joins) else {
                throw RelayRefusal(kind: .forbidden, reason: "the push is not signed by a member of circle \(circle)")
            }
        }
        let pending = live.subtracting(answered).count
        if asking > 0, pending + asking > Self.pendingJoinRequests {
            throw RelayRefusal(
                kind: .full, reason: "circle \(circle) holds \(pending) pending join requests, its most; ask again once a member has answered some")
        }
        if !expired.isEmpty { try await storage.remove(circle: circle, stream: .joins, cursors: expired) }
    }
}
