package import Foundation
package import KeychainModel
import KeyferryCrypto

/// Whether an item leaves its device through sync, and if not, why.
package enum SyncEligibility: String, Sendable, Codable {
    case replicates
    /// Not `kSecAttrSynchronizable`: stays on its device, as any local item.
    case notSynchronizable
    /// Synchronizable but ThisDeviceOnly: Apple's sync engine skips it silently; Keyferry
    /// reports it as skipped.
    case deviceBound
    /// Synchronizable with access-control constraints, which cannot be added in the first
    /// place (errSecParam); listed for completeness.
    case accessControlled

    package init(_ record: ItemRecord) {
        self =
            if !record.synchronizable { .notSynchronizable } else if record.protection.isThisDeviceOnly { .deviceBound } else if record.accessControl != nil {
                .accessControlled
            } else { .replicates }
    }
}

/// The class key an item travels under: A for `whenUnlocked`, C for `afterFirstUnlock` and
/// `always`, as in iCloud Keychain. A receiver that is locked cannot open class A.
package enum SyncClass: UInt8, Sendable, CaseIterable {
    case a = 0x41
    case c = 0x43

    /// nil for the ThisDeviceOnly classes, which never travel.
    package init?(_ protection: ProtectionClass) {
        switch protection {
        case .whenUnlocked: self = .a
        case .afterFirstUnlock, .always: self = .c
        default: return nil
        }
    }
}

/// One version of a replicated item, as its envelope carries it: the whole item, or the
/// tombstone a delete leaves (its identity and primary key, no data).
package struct SyncedItem: Hashable, Sendable {
    package var version: HybridTimestamp
    package var isTombstone: Bool
    package var record: ItemRecord

    package init(version: HybridTimestamp, isTombstone: Bool, record: ItemRecord) {
        self.version = version
        self.isTombstone = isTombstone
        self.record = record
    }

    static let formatVersion: UInt8 = 1

    /// How far ahead of this device's clock a version may be: clocks drift, but a version a day
    /// ahead would win every merge for a day (and near the end of the clock's range, stop it).
    package static let maximumClockLead: TimeInterval = 24 * 3600

    /// Checks a version another member wrote as a local add is checked: the class's attributes
    /// with values of their kinds, finite dates, and a version not from the far future. A
    /// member's bug or a hostile member is refused here, before anything is written.
    package func checkReceived(now: Date) throws(EnvelopeError) {
        let item = "item \(record.uuid)"
        do {
            try record.itemClass.validate(record.attributes)
        } catch {
            throw .inconsistent("\(item): \(error.message)")
        }
        let dates =
            [record.creationDate, record.modificationDate]
            + record.attributes.values.compactMap {
                if case .date(let date) = $0 { date } else { nil }
            }
        guard dates.allSatisfy({ $0.timeIntervalSince1970.isFinite }) else {
            throw .inconsistent("\(item) carries a date that is not a time")
        }
        let limit = (now.timeIntervalSince1970 + Self.maximumClockLead) * 1000
        guard Double(version.milliseconds) <= limit else {
            throw .inconsistent("\(item) has version \(version), more than a day ahead of this device's clock")
        }
    }

    /// See Protocol/sync.md, "Item payload".
    package var encoded: [UInt8] {
        var w = ByteWriter(capacity: 256 + (record.data?.count ?? 0))
        w.uint8(Self.formatVersion)
        w.uint8(isTombstone ? 1 : 0)
        w.uint64(version.milliseconds)
        w.uint32(version.counter)
        w.uuid(record.uuid)
        w.string(record.itemClass.rawValue)
        w.string(record.accessGroup)
        w.string(record.protection.rawValue)
        w.date(record.creationDate)
        w.date(record.modificationDate)
        w.attributes(record.attributes)
        w.lengthPrefixed(isTombstone ? Data() : record.data ?? Data())
        return w.bytes
    }

    package init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        guard try r.uint8() == Self.formatVersion else { throw ByteReader.Malformed() }
        let flag = try r.uint8()
        guard flag <= 1 else { throw ByteReader.Malformed() }
        isTombstone = flag == 1
        version = HybridTimestamp(milliseconds: try r.uint64(), counter: try r.uint32())
        let uuid = try r.uuid()
        guard let itemClass = ItemClass(rawValue: try r.string()) else { throw ByteReader.Malformed() }
        let accessGroup = try r.string()
        guard let protection = ProtectionClass(rawValue: try r.string()), SyncClass(protection) != nil else { throw ByteReader.Malformed() }
        let created = try r.date()
        let modified = try r.date()
        let attributes = try r.attributes()
        let data = Data(try r.lengthPrefixed())
        guard r.isAtEnd, !isTombstone || data.isEmpty else { throw ByteReader.Malformed() }
        record = ItemRecord(
            itemClass: itemClass, uuid: uuid, accessGroup: accessGroup, protection: protection, synchronizable: true,
            accessControl: nil, creationDate: created, modificationDate: modified, attributes: attributes,
            data: isTombstone ? nil : data)
    }

    /// The tie-break between two versions with the same timestamp: BLAKE2b-256 of the payload.
    package var digest: [UInt8] { ContentDigest.of(encoded) }

    package var stamp: VersionStamp { VersionStamp(timestamp: version, digest: digest) }
}

/// What the merge rule compares of a version: when it was written, and its payload's digest.
package struct VersionStamp: Hashable, Sendable {
    package var timestamp: HybridTimestamp
    package var digest: [UInt8]

    package init(timestamp: HybridTimestamp, digest: [UInt8]) {
        self.timestamp = timestamp
        self.digest = digest
    }
}

/// Which of two versions of one item every node keeps: the newer timestamp, and on a tie
/// the smaller digest (Apple's rule). A delete is a version like any other, so a delete
/// against a concurrent update resolves the same way.
package enum MergeRule {
    package static func prefers(_ candidate: VersionStamp, over current: VersionStamp) -> Bool {
        if candidate.timestamp != current.timestamp { return candidate.timestamp > current.timestamp }
        return candidate.digest.lexicographicallyPrecedes(current.digest)
    }

    package static func prefers(_ candidate: SyncedItem, over current: SyncedItem) -> Bool {
        prefers(candidate.stamp, over: current.stamp)
    }
}
