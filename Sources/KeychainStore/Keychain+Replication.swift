import Foundation
import GRDB
import KeychainModel
import KeyferryThreads

extension Keychain {
    /// A version another member wrote, to write here: the item, or with `tombstoneDate` the
    /// tombstone of its deletion.
    package struct ReplicatedVersion: Sendable {
        package var record: ItemRecord
        package var tombstoneDate: Date?

        package init(record: ItemRecord, tombstoneDate: Date?) {
            self.record = record
            self.tombstoneDate = tombstoneDate
        }
    }

    /// What became of one replicated version.
    package enum ReplicationOutcome: Sendable, Equatable {
        /// Written, at this change sequence.
        case written(changeSequence: Int64)
        /// Another item holds its primary key and stays: `replaces` said so.
        case superseded
        /// A live device-bound item (ThisDeviceOnly, or not synchronizable) holds its primary
        /// key: replication never replaces one, whoever wrote the synced version.
        case keptDeviceBound(UUID)
    }

    /// Writes synchronizable items as other members wrote them (UUID, dates, group, protection,
    /// attributes), sealed on every core and written in one transaction. A row with the same
    /// UUID gives way. A row with another UUID under the same primary key gives way only when
    /// it is not device-bound and `replaces` says so (it is asked with that row's UUID);
    /// otherwise the version is not written. Each outcome carries the change sequence written,
    /// so the sync engine can tell its own writes from the device's. Device scope only.
    package func applyReplicated(_ versions: [ReplicatedVersion], replaces: (_ index: Int, _ holder: UUID) -> Bool) throws -> [ReplicationOutcome] {
        try requireDeviceScope()
        let keys = try device.availableKeys()
        let rows = try ParallelMap.map(versions) { version -> SealedRow in
            let record = version.record
            guard record.synchronizable, !record.protection.isThisDeviceOnly, record.accessControl == nil else {
                throw KeychainError(.param, "only synchronizable items without access control replicate.")
            }
            guard let classKeys = keys[record.protection] else { throw unavailable(record.protection) }
            return sealedRow(for: record, keys: classKeys)
        }
        return try device.database.write { db in
            try device.database.saveChangeCounter(db)
            var outcomes: [ReplicationOutcome] = []
            for (index, (row, version)) in zip(rows, versions).enumerated() {
                if let holding = try ItemTable.keyHolder(db, primaryKeyHash: row.header.primaryKeyHash), case let holder = holding.uuid,
                    holder != row.header.uuid
                {
                    let bound = holding.protection?.isThisDeviceOnly ?? true
                    if !holding.isTombstone, bound || !holding.synchronizable {
                        outcomes.append(.keptDeviceBound(holder))
                        continue
                    }
                    if !replaces(index, holder) {
                        outcomes.append(.superseded)
                        continue
                    }
                }
                try ItemTable.giveWay(db, uuid: row.header.uuid, primaryKeyHash: row.header.primaryKeyHash)
                var sequence = device.database.nextChangeSequence()
                _ = try ItemTable.insert(db, row, changeSequence: sequence)
                if let date = version.tombstoneDate {
                    sequence = device.database.nextChangeSequence()
                    try ItemTable.bury(db, id: db.lastInsertedRowID, at: date, changeSequence: sequence)
                }
                outcomes.append(.written(changeSequence: sequence))
            }
            return outcomes
        }
    }

    /// The row a record becomes on this device, sealed under this device's class keys, with
    /// `secret` or else the record's data.
    func sealedRow(for record: ItemRecord, keys: ClassKeys, secret: Data? = nil) -> SealedRow {
        let metadata = Self.metadata(of: record)
        let header = header(
            uuid: record.uuid, itemClass: record.itemClass, protection: record.protection,
            synchronizable: record.synchronizable, metadata: metadata)
        return SealedRow.seal(
            header: header, metadata: metadata, secret: secret ?? record.data ?? Data(), classKey: keys.classKey,
            random: device.entropy.bytes(SealedRow.entropyPerRow))
    }

    /// A record's metadata as written on arrival: biometry bindings never travel.
    private static func metadata(of record: ItemRecord) -> ItemMetadata {
        ItemMetadata(
            accessGroup: record.accessGroup, accessControl: record.accessControl, biometryBinding: [],
            creationDate: record.creationDate, modificationDate: record.modificationDate,
            attributes: record.itemClass.withPrimaryKeyDefaults(record.attributes))
    }
}
