package import Foundation
import KeychainModel
import KeyferryCrypto
package import SyncWire

/// Where a relay keeps what members push: logs per circle and stream, appended to and
/// compacted (Protocol/relay.md, "Compaction"), never rewritten in place. Embedded
/// SQLite is the default (`SQLiteRelayStorage`); a server database (`PostgresRelayStorage`)
/// takes its place when a fleet outgrows one machine, and then several relays share it: a
/// storage keeps every fact a relay decides by, so a relay holds no state of its own.
///
/// Within a stream, cursors only grow, in the order appends commit: a reader that has seen a
/// cursor never misses a record below it that commits later.
package protocol RelayStorage: Sendable {
    /// Appends the records not already held (a retried push stores nothing twice), in order,
    /// and returns how many were new. With `ifLastIs`, it appends only while the stream's
    /// newest record is still at that cursor (0: the stream is empty), and otherwise throws
    /// `RelayStorageConflict` having stored nothing: what the caller checked the records against
    /// has changed (another relay of the same database wrote first). With `limits`, an append
    /// that would take the circle or the relay past them throws `RelayStorageFull` having
    /// stored nothing: checked in the same transaction as the append, so concurrent pushes
    /// cannot pass a limit together, after what the append let go is subtracted.
    ///
    /// With `facts` (one per body, for batches of envelopes), the storage compacts in the same
    /// transaction (Protocol/relay.md, "Compaction"): a batch all of whose versions a newer
    /// version of the same item supersedes, and that is not its author's newest, is dropped,
    /// and the author's `CompactedBatches` note is appended again to say so.
    func append(
        _ bodies: [[UInt8]], facts: [BatchFacts]?, circle: UUID, stream: RelayStream, ifLastIs expected: UInt64?, within limits: RelayLimits?
    ) async throws -> Int

    /// The records after `cursor`, oldest first, at most `limit`.
    func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord]

    /// The bytes of every record held for `circle`, for its quota.
    func byteCount(circle: UUID) async throws -> Int

    /// Keeps `member`'s word that it applied the circle's envelopes through `cursor` (the
    /// greatest it gave, at `now`), then lets go of deletions: a tombstone that every one of
    /// `members` heard from within `retention` has acknowledged no longer counts as its item's
    /// newest version, so its batch can be compacted. A member not heard from within `retention`
    /// holds nothing back; the circle's resync floor (`envelopes`) rises past what was let go.
    func acknowledge(circle: UUID, member: [UInt8], through cursor: UInt64, members: [[UInt8]], retention: TimeInterval, now: Date) async throws

    /// The `envelopes` records after `cursor`, as `records` reads them, read together with the
    /// circle's resync floor: the cursor below which a member missed a deletion the relay let
    /// go, and must read the stream again from the start (0: none).
    func envelopes(circle: UUID, after cursor: UInt64, limit: Int) async throws -> (records: [RelayRecord], resyncFloor: UInt64)

    /// The deletions let go, by item UUID after `item`, at most `limit`.
    func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion]

    /// The key generations the circle's newest versions are sealed under; nil while it holds
    /// batches kept before compaction, whose generations it never read.
    func liveGenerations(circle: UUID) async throws -> Set<UInt32>?

    /// Removes the records at `cursors` of `stream`, their bytes no longer counted: key
    /// records no member can need any more.
    func remove(circle: UUID, stream: RelayStream, cursors: [UInt64]) async throws
}

extension RelayStorage {
    /// Appends whatever the stream holds meanwhile, with no limit.
    package func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, ifLastIs expected: UInt64? = nil) async throws -> Int {
        try await append(bodies, facts: nil, circle: circle, stream: stream, ifLastIs: expected, within: nil)
    }
}

/// What a relay reads in a batch's signed headers so that its storage can tell when every
/// version in the batch is superseded: the author's chain position and each item's version.
package struct BatchFacts: Sendable, Equatable {
    package struct Version: Sendable, Equatable {
        package var item: UUID
        package var version: HybridTimestamp
        package var isTombstone: Bool
        /// The key generation it is sealed under: one no newest version needs can go.
        package var epoch: UInt32
    }

    package var author: [UInt8]
    package var sequence: UInt64
    /// At most one per item: the newest the batch holds.
    package var versions: [Version]

    package init(_ batch: EnvelopeBatch) {
        author = batch.author.bytes
        sequence = batch.sequence
        var newest: [UUID: Version] = [:]
        for envelope in batch.envelopes {
            let header = envelope.header
            if let held = newest[header.item], held.version >= header.version { continue }
            newest[header.item] = Version(item: header.item, version: header.version, isTombstone: header.isTombstone, epoch: header.epoch)
        }
        versions = newest.values.sorted { $0.item.precedesInTextOrder($1.item) }
    }

    /// The note that names `author`'s compacted batches, as `CompactedBatches` writes it.
    package static func note(_ held: [UInt8]?, circle: UUID, author: [UInt8], adding sequences: [UInt64]) -> [UInt8]? {
        guard let key = try? SigningPublicKey(bytes: author) else { return nil }
        var note = held.flatMap { try? CompactedBatches(bytes: $0) } ?? CompactedBatches(circle: circle, author: key)
        for sequence in sequences { note.insert(sequence...sequence) }
        guard note.sequences.count <= CompactedBatches.maximumRanges else { return nil }
        return note.bytes
    }
}

/// What a relay holds at most, so that no one, member or circle creator, fills its disk (who
/// may create a circle is `RelayAdmission`'s), and how long it waits on an absent member.
package struct RelayLimits: Sendable, Equatable {
    /// Bytes of one circle's records, past which it takes no more envelopes.
    package var circleBytes: Int
    /// Bytes past `circleBytes` that membership entries and key records may still take, so a
    /// full circle can still remove a member, admit one and hand out the new generation's keys,
    /// and no more: a circle's author pushing key records without end stops at
    /// `circleBytes + reserveBytes` like anyone else. 1 MiB: a membership entry is at most
    /// 4 KiB, and a generation's keys take a few hundred bytes per member.
    package var reserveBytes: Int
    /// Bytes of every circle's records together.
    package var totalBytes: Int
    /// Circles the relay holds; creating one more is refused.
    package var circles: Int
    /// How long a member may go without acknowledging before the deletions it has not seen
    /// are let go anyway; it then resyncs. 30 days.
    package var retention: TimeInterval

    package init(
        circleBytes: Int = 1 << 30, reserveBytes: Int = 1 << 20, totalBytes: Int = 64 << 30, circles: Int = 10_000,
        retention: TimeInterval = 30 * 86_400
    ) {
        self.circleBytes = circleBytes
        self.reserveBytes = reserveBytes
        self.totalBytes = totalBytes
        self.circles = circles
        self.retention = retention
    }

    /// The most bytes a circle may hold after an append to `stream`: envelopes stop at the
    /// quota, membership and keys at the quota and the reserve.
    package func circleBytes(for stream: RelayStream) -> Int {
        stream == .envelopes ? circleBytes : circleBytes + reserveBytes
    }
}

/// A conditional append found the stream moved on since the caller read it.
package struct RelayStorageConflict: Error, Sendable {
    package init() {}
}

/// An append that would take a circle or the relay past its `RelayLimits`; nothing was stored.
package struct RelayStorageFull: Error, Sendable, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }

    /// The checks every storage makes inside its append, given what it holds: `held` bytes of
    /// the circle (nil: a circle it does not hold yet, when `circles` says how many it holds),
    /// `total` bytes in all, and `adding` new bytes.
    package static func check(
        _ limits: RelayLimits, circle: UUID, stream: RelayStream, held: Int?, circles: Int?, total: Int, adding: Int
    ) throws {
        if held == nil, let circles, circles >= limits.circles {
            throw RelayStorageFull("this relay holds \(limits.circles) circles, its most; it creates no more")
        }
        let most = limits.circleBytes(for: stream)
        if (held ?? 0) + adding > most {
            throw RelayStorageFull(
                "circle \(circle) holds \(held ?? 0) bytes and may hold \(most)\(stream == .envelopes ? "" : " of \(stream.rawValue) records, its reserve included"); "
                    + "nothing more is kept for it")
        }
        if total + adding > limits.totalBytes {
            throw RelayStorageFull("this relay holds \(total) bytes of records and may hold \(limits.totalBytes); nothing more is kept")
        }
    }
}

/// The relay's database failed (it is down, full, or refused a statement): the push or pull
/// was not served, and nothing of a push was kept.
package struct RelayStorageError: Error, Sendable, CustomStringConvertible {
    package var reason: String
    package init(_ reason: String) { self.reason = reason }
    package var description: String { "the relay's database failed: \(reason)" }
}

/// A relay inside this process: the storage a relay server keeps, and its checks, with no
/// network between. For a circle on scratch devices, such as the survival matrix's iCloud
/// Keychain path, or a test's `SyncCircle`.
package struct LocalRelay: RelayTransport {
    private let keeper: RelayKeeper

    package init(storage: any RelayStorage, limits: RelayLimits = RelayLimits(), now: @escaping @Sendable () -> Date = Date.init) {
        keeper = RelayKeeper(storage: storage, limits: limits, now: now)
    }

    package func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        do {
            return try await keeper.push(bodies, circle: circle, stream: stream, proof: proof)
        } catch let refusal as RelayRefusal {
            throw RelayError.refused(refusal.reason)
        }
    }

    package func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        do {
            return try await keeper.records(circle: circle, stream: stream, after: cursor, limit: limit)
        } catch let refusal as RelayRefusal {
            throw refusal.kind == .resyncNeeded ? RelayError.resyncNeeded(refusal.reason) : RelayError.refused(refusal.reason)
        }
    }

    package func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws {
        do {
            try await keeper.acknowledge(circle: circle, through: cursor, proof: proof)
        } catch let refusal as RelayRefusal {
            throw RelayError.refused(refusal.reason)
        }
    }

    package func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] {
        try await keeper.storage.forgottenDeletions(circle: circle, after: item, limit: limit)
    }
}
