import Foundation
import KeyferryThreads
import SyncWire

/// Why a relay refused a push, with the HTTP status that says it.
public struct RelayRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
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
    }

    public var kind: Kind
    public var reason: String

    public var description: String { reason }
}

/// What a relay keeps and refuses: the checks of Protocol/sync.md, "Relay", for the server and
/// for a relay in the process alike. It holds no key, yet it knows each circle's membership,
/// since every entry is public and signed: it keeps a membership entry only when it extends the
/// history, and `keys` and `envelopes` records only from a member (a push signed by one,
/// `PushProof`), so a stranger cannot write to a circle at all, and each circle's bytes stay
/// within a quota.
public actor RelayKeeper {
    /// Storage calls block (SQLite): they run on a queue of the keeper's own, so a slow write
    /// does not hold up the relay's other connections.
    private nonisolated let executor = BlockingSerialExecutor(label: "keyferry.relay.keeper")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private struct KnownCircle {
        var history: CircleHistory
        /// The membership log is read up to here.
        var cursor: UInt64
        var bytes: Int
    }

    public let storage: any RelayStorage
    /// The most bytes of records one circle may hold.
    public let quota: Int
    private var circles: [UUID: KnownCircle] = [:]

    public static let defaultQuota = 1 << 30

    public init(storage: any RelayStorage, quota: Int = RelayKeeper.defaultQuota) {
        self.storage = storage
        self.quota = quota
    }

    /// Checks and keeps a push; returns how many records were new.
    public func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) throws -> Int {
        if let big = bodies.first(where: { $0.count > RelayWire.maximumRecordBytes }) {
            throw RelayRefusal(kind: .malformed, reason: "a record of \(big.count) bytes exceeds the \(RelayWire.maximumRecordBytes)-byte limit")
        }
        var known = try self.known(circle)
        let size = bodies.reduce(0) { $0 + $1.count }
        if let known, known.bytes + size > quota {
            throw RelayRefusal(kind: .full, reason: "circle \(circle) holds \(known.bytes) bytes and may hold \(quota); nothing more is kept for it")
        }
        switch stream {
        case .membership:
            known = try admitEntries(bodies, circle: circle, known: known)
        case .keys, .envelopes:
            guard let known else { throw RelayRefusal(kind: .forbidden, reason: "there is no circle \(circle) on this relay") }
            try checkSigned(bodies, circle: circle, stream: stream, proof: proof, history: known.history)
        }
        let added = try storage.append(bodies, circle: circle, stream: stream)
        if var updated = known {
            updated.bytes = added == bodies.count ? updated.bytes + size : try storage.byteCount(circle: circle)
            circles[circle] = updated
        }
        return added
    }

    public func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) throws -> [RelayRecord] {
        try storage.records(circle: circle, stream: stream, after: cursor, limit: limit)
    }

    /// The circle as held: its history read from the stored log (what does not extend it is
    /// passed over, as members pass it over), its size. Nil when the relay holds none of it.
    private func known(_ circle: UUID) throws -> KnownCircle? {
        if var known = circles[circle] {
            // Another writer of the same storage may have added entries.
            let newer = try storage.records(circle: circle, stream: .membership, after: known.cursor, limit: RelayWire.maximumPullRecords)
            if let last = newer.last {
                _ = known.history.extend(with: newer.lazy.map(\.body))
                known.cursor = last.cursor
                circles[circle] = known
            }
            return known
        }
        let log = try storage.records(circle: circle, stream: .membership, after: 0, limit: Int.max)
        guard let last = log.last, let (history, _) = try? CircleHistory.reading(log.map(\.body), circle: circle) else { return nil }
        let known = KnownCircle(history: history, cursor: last.cursor, bytes: try storage.byteCount(circle: circle))
        circles[circle] = known
        return known
    }

    /// Every entry must extend the history (or be one it holds already); the first of a new
    /// circle must create it, under the id its creator's key makes.
    private func admitEntries(_ bodies: [[UInt8]], circle: UUID, known: KnownCircle?) throws -> KnownCircle? {
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
        return KnownCircle(history: history, cursor: known?.cursor ?? 0, bytes: known?.bytes ?? 0)
    }

    /// `keys` and `envelopes` records come from a member: the push is signed by one (for `keys`,
    /// also the author of the current generation, who may have just left), every key record by
    /// its generation's author, every batch by the pusher.
    private func checkSigned(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?, history: CircleHistory) throws {
        guard let proof else {
            throw RelayRefusal(
                kind: .unsigned, reason: "a push to \(stream.rawValue) is signed by a member of the circle (Keyferry-Signer, Keyferry-Signature)")
        }
        let mayPush = history.isMember(proof.signer) || (stream == .keys && history.generationAuthors[history.epoch] == proof.signer)
        guard mayPush, proof.holds(for: bodies, circle: circle, stream: stream) else {
            throw RelayRefusal(kind: .forbidden, reason: "the push is not signed by a member of circle \(circle)")
        }
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
            case .membership:
                break
            }
        }
    }
}
