import Foundation
import KeychainModel
import Sync

/// The bytes of the relay's HTTP bodies (Protocol/sync.md, "Relay"): a push is a list of
/// records, a pull answers records with their cursors.
public enum RelayWire {
    public static let version = "v1"
    /// A push larger than this is refused whole.
    public static let maximumPushBytes = 16 << 20
    /// The most records one pull answers, and their most bytes (but always one record).
    public static let maximumPullRecords = 10_000
    public static let maximumPullBytes = 32 << 20
    /// The largest record the relay keeps: an envelope of a large item, with room to spare.
    public static let maximumRecordBytes = 4 << 20

    /// `(u32 length | bytes)*`
    public static func encodePush(_ bodies: [[UInt8]]) -> [UInt8] {
        var w = ByteWriter(capacity: bodies.reduce(0) { $0 + 4 + $1.count })
        for body in bodies { w.lengthPrefixed(body) }
        return w.bytes
    }

    public static func decodePush(_ bytes: [UInt8]) throws -> [[UInt8]] {
        var r = ByteReader(bytes)
        var bodies: [[UInt8]] = []
        while !r.isAtEnd { bodies.append(Array(try r.lengthPrefixed())) }
        return bodies
    }

    /// `(u64 cursor | u32 length | bytes)*`
    public static func encodePull(_ records: [RelayRecord]) -> [UInt8] {
        var w = ByteWriter(capacity: records.reduce(0) { $0 + 12 + $1.body.count })
        for record in records {
            w.uint64(record.cursor)
            w.lengthPrefixed(record.body)
        }
        return w.bytes
    }

    public static func decodePull(_ bytes: [UInt8]) throws -> [RelayRecord] {
        var r = ByteReader(bytes)
        var records: [RelayRecord] = []
        while !r.isAtEnd { records.append(RelayRecord(cursor: try r.uint64(), body: Array(try r.lengthPrefixed()))) }
        return records
    }

    /// What the relay checks before keeping a record, knowing no keys: that it is what its
    /// stream holds, for this circle, and (for membership entries) signed by the key it names.
    /// Batch signatures are left to the members, who check every one before opening anything:
    /// checking them here too would add work for no protection the members lack. Returns why
    /// not, or nil.
    public static func refusal(of body: [UInt8], circle: UUID, stream: RelayStream) -> String? {
        guard body.count <= maximumRecordBytes else { return "a record of \(body.count) bytes exceeds the \(maximumRecordBytes)-byte limit" }
        switch stream {
        case .envelopes:
            guard let batch = try? EnvelopeBatch(bytes: body) else { return "a record is not a batch of envelopes" }
            guard batch.circle == circle else { return "a batch of envelopes is for another circle" }
        case .membership:
            guard let entry = try? MembershipEntry(bytes: body) else { return "a record is not a membership entry" }
            guard entry.circle == circle else { return "a membership entry is for another circle" }
            guard entry.isSignedBySigner else { return "a membership entry's signature does not verify" }
        case .keys:
            // Sealed under keys the relay does not hold; members check them.
            break
        }
        return nil
    }
}
