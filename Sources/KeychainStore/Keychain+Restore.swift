package import Foundation
import GRDB
public import KeychainModel
import KeyferryCrypto
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
    /// Returns the items that did not read back, which are not written (see `restore(_ sealed:)`).
    @discardableResult
    public func restore(_ records: [ItemRecord]) throws -> [DamagedItem] {
        try restore(try sealedForRestore(records))
    }

    /// Items sealed under this device's class keys, ready to be written by `restore(_:)`.
    package struct RestoreRows: Sendable {
        var rows: [SealedRow]
    }

    /// An item as a restore brings it: whole, or still sealed under its own key (an archive's).
    package enum RestoredItem: Sendable {
        case whole(ItemRecord)
        case sealed(ItemSeal.Opened)

        package var record: ItemRecord {
            switch self {
            case .whole(let record): record
            case .sealed(let opened): opened.record
            }
        }

        /// The secret, opened.
        package func secret() throws -> Data {
            switch self {
            case .whole(let record): record.data ?? Data()
            case .sealed(let opened): try opened.secret()
            }
        }
    }

    /// Seals items for `restore(_:)`, on every core, without touching the database: a restore
    /// seals the next batch while the last one is written.
    package func sealedForRestore(_ records: [ItemRecord]) throws -> RestoreRows {
        try sealedForRestore(records.map(RestoredItem.whole))
    }

    /// As `sealedForRestore(_ records:)`; an item that arrives sealed keeps its secret sealed as
    /// it came, its key wrapped under this device's class key, and has its metadata sealed under
    /// this device's metadata key (without a biometry binding: enrollments never travel).
    package func sealedForRestore(_ items: [RestoredItem]) throws -> RestoreRows {
        try requireDeviceScope()
        let keys = try device.availableKeys()
        let rows = try ParallelMap.mapChunks(items) { chunk in
            // Each item's two nonces (its key's wrap, its metadata) in one draw per piece: a draw
            // is a system call.
            let perItem = 2 * AEAD.nonceByteCount
            let nonces = device.entropy.bytes(chunk.count * perItem)
            return try chunk.enumerated().map { index, item -> SealedRow in
                let record = item.record
                // Every import path decides this before it gets here; the store refuses it anyway.
                guard !Device.isReservedAccessGroup(record.accessGroup) else {
                    throw KeychainError(.param, "a restore may not write into Keyferry's own access group \(record.accessGroup).")
                }
                try checkPasscode(for: record.protection)
                guard let classKeys = keys[record.protection] else { throw unavailable(record.protection) }
                switch item {
                case .whole(let record):
                    return sealedRow(for: record, keys: classKeys)
                case .sealed(let opened):
                    return sealedRow(for: opened, keys: classKeys, nonces: nonces[(index * perItem)..<((index + 1) * perItem)])
                }
            }
        }
        return RestoreRows(rows: rows.flatMap { $0 })
    }

    /// Writes sealed items in one transaction, as `restore(_ records:)` describes, then reads
    /// each back through the store's own read path (the row's columns, its attributes and its
    /// secret) before the transaction commits: an item that would not open again is removed
    /// and returned, so no restore ever reports an item it cannot read. Inside
    /// `loadingInBulk`, `load` stands in for the unique indexes.
    @discardableResult
    package func restore(_ sealed: RestoreRows, in load: BulkLoad? = nil) throws -> [DamagedItem] {
        try requireDeviceScope()
        let keys = try device.availableKeys()
        return try device.database.write { db in
            try device.database.saveChangeCounter(db)
            let before = device.database.latestChangeSequence
            for row in sealed.rows {
                let h = row.header
                if let load {
                    for id in load.candidates(uuid: h.uuid, primaryKeyHash: h.primaryKeyHash) {
                        guard let held = try ItemTable.keys(db, id: id), held.uuid == h.uuid || held.primaryKeyHash.elementsEqual(h.primaryKeyHash) else {
                            continue
                        }
                        try ItemTable.delete(db, id: id)
                        load.forget(uuid: held.uuid, primaryKeyHash: held.primaryKeyHash, id: id)
                        load.gaveWay(uuid: held.uuid, changeSequence: held.changeSequence)
                    }
                    load.record(
                        uuid: h.uuid, primaryKeyHash: h.primaryKeyHash,
                        id: try ItemTable.insertUnique(db, row, changeSequence: device.database.nextChangeSequence()))
                } else {
                    try ItemTable.giveWay(db, uuid: h.uuid, primaryKeyHash: h.primaryKeyHash)
                    _ = try ItemTable.insert(db, row, changeSequence: device.database.nextChangeSequence())
                }
            }
            let written = try Array(ItemTable.changes(db, since: before, accessGroupHashes: nil))
            let readBack = try ParallelMap.map(written) { row in try opening(row) { _ = try open(row, keys: keys, withData: true) } }
            var unreadable: [DamagedItem] = []
            for (row, result) in zip(written, readBack) {
                guard case .failure(let item) = result else { continue }
                unreadable.append(item)
                try ItemTable.delete(db, id: row.id)
                load?.forget(uuid: row.header.uuid, primaryKeyHash: row.header.primaryKeyHash, id: row.id)
            }
            return unreadable
        }
    }

    func requireDeviceScope() throws {
        guard case .device = scope else { throw KeychainError(.param, "restoring works on the device's whole keychain, not an app's.") }
    }
}
