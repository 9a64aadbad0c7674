import Foundation
import GRDB
import KeychainModel

extension Keychain {
    /// Writes a synchronizable item as another member wrote it (its UUID, dates, group,
    /// protection and attributes), or, with `tombstoneDate`, the tombstone of its deletion. Any
    /// row holding the same UUID or primary key gives way: the sync engine has already decided
    /// that this version wins. Returns the change sequence of the write, so the engine can tell
    /// the writes it made from the device's own. Device scope only.
    public func applyReplicated(_ record: ItemRecord, tombstoneDate: Date?) throws -> Int64 {
        try requireDeviceScope()
        guard record.synchronizable, !record.protection.isThisDeviceOnly, record.accessControl == nil else {
            throw KeychainError(.param, "only synchronizable items without access control replicate.")
        }
        let keys = try device.availableKeys()
        guard let classKeys = keys[record.protection] else { throw unavailable(record.protection) }
        let row = sealedRow(for: record, keys: classKeys)
        return try device.database.write { db in
            try device.database.saveChangeCounter(db)
            try db.execute(sql: "DELETE FROM item WHERE uuid = ? OR pk_hash = ?",
                           arguments: [UUIDBytes.bytes(row.header.uuid), Data(row.header.primaryKeyHash)])
            var sequence = device.database.nextChangeSequence()
            _ = try ItemTable.insert(db, row, changeSequence: sequence)
            if let tombstoneDate {
                sequence = device.database.nextChangeSequence()
                try ItemTable.bury(db, id: db.lastInsertedRowID, at: tombstoneDate, changeSequence: sequence)
            }
            return sequence
        }
    }

    /// The UUID of the row (live or tombstone) that holds `record`'s primary key, if any: how
    /// the sync engine finds a conflict between two items added apart under the same key.
    public func primaryKeyHolder(of record: ItemRecord) throws -> UUID? {
        try requireDeviceScope()
        let metadata = Self.metadata(of: record)
        let hash = header(uuid: record.uuid, itemClass: record.itemClass, protection: record.protection,
                          synchronizable: record.synchronizable, metadata: metadata).primaryKeyHash
        return try device.database.read { db in
            try Data.fetchOne(db, sql: "SELECT uuid FROM item WHERE pk_hash = ?", arguments: [Data(hash)]).map { UUIDBytes.uuid([UInt8]($0)) }
        }
    }

    /// The row a record becomes on this device, sealed under this device's class keys.
    func sealedRow(for record: ItemRecord, keys: ClassKeys) -> SealedRow {
        let metadata = Self.metadata(of: record)
        let header = header(uuid: record.uuid, itemClass: record.itemClass, protection: record.protection,
                            synchronizable: record.synchronizable, metadata: metadata)
        return SealedRow.seal(header: header, metadata: metadata, secret: record.data ?? Data(), keys: keys,
                              random: device.entropy.bytes(SealedRow.entropyPerRow))
    }

    /// A record's metadata as written on arrival: biometry bindings never travel.
    private static func metadata(of record: ItemRecord) -> ItemMetadata {
        ItemMetadata(accessGroup: record.accessGroup, accessControl: record.accessControl, biometryBinding: [],
                     creationDate: record.creationDate, modificationDate: record.modificationDate,
                     attributes: record.itemClass.withPrimaryKeyDefaults(record.attributes))
    }
}
