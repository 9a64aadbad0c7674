import Foundation
import GRDB
import KeychainModel
import KeyferryThreads

extension Keychain {
    /// Deletes every non-synchronizable item but the device's own, the first step of a restore
    /// (Apple's merge: the backup replaces what is device-local; synchronizable items merge).
    /// Device scope only.
    public func deleteNonSynchronizableItems() throws {
        try requireDeviceScope()
        try device.database.write { db in
            try device.database.saveChangeCounter(db)
            try ItemTable.deleteNonSynchronizable(db, keepingGroup: device.ownAccessGroupHash)
        }
    }

    /// Writes items as a backup recorded them: UUID, dates, class, protection, access group,
    /// synchronizable and access control are kept. An item holding the same primary key or UUID,
    /// live or tombstone, gives way. All in one transaction. Device scope only.
    ///
    /// An item bound to a biometry enrollment (`biometryCurrentSet`) comes back bound to none,
    /// so biometry no longer opens it, as after a new enrollment.
    public func restore(_ records: [ItemRecord]) throws {
        try restore(try sealedForRestore(records))
    }

    /// Items sealed under this device's class keys, ready to be written by `restore(_:)`.
    package struct RestoreRows: Sendable {
        fileprivate var rows: [SealedRow]
    }

    /// Seals items for `restore(_:)`, on every core, without touching the database: a restore
    /// seals the next batch while the last one is written.
    package func sealedForRestore(_ records: [ItemRecord]) throws -> RestoreRows {
        try requireDeviceScope()
        let keys = try device.availableKeys()
        return RestoreRows(
            rows: try ParallelMap.map(records) { record -> SealedRow in
                try checkPasscode(for: record.protection)
                guard let classKeys = keys[record.protection] else { throw unavailable(record.protection) }
                return sealedRow(for: record, keys: classKeys)
            })
    }

    /// Writes sealed items in one transaction, as `restore(_ records:)` describes.
    package func restore(_ sealed: RestoreRows) throws {
        try requireDeviceScope()
        try device.database.write { db in
            try device.database.saveChangeCounter(db)
            for row in sealed.rows {
                try ItemTable.giveWay(db, uuid: row.header.uuid, primaryKeyHash: row.header.primaryKeyHash)
                _ = try ItemTable.insert(db, row, changeSequence: device.database.nextChangeSequence())
            }
        }
    }

    func requireDeviceScope() throws {
        guard case .device = scope else { throw KeychainError(.param, "restoring works on the device's whole keychain, not an app's.") }
    }
}
