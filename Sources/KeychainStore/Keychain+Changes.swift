import Foundation
import GRDB
import KeychainModel

/// One entry of the change feed: an item as last written, or the tombstone a synchronizable
/// item left when it was deleted.
public struct ItemChange: Sendable {
    /// The device-wide sequence number of the write; strictly increasing, never reused.
    public var changeSequence: Int64
    public var isTombstone: Bool
    /// When the item was deleted: younger than its last modification.
    public var tombstoneDate: Date?
    /// The item with its class and protection class; `data` only when asked and not a tombstone.
    public var record: ItemRecord
}

extension Keychain {
    /// Every item and tombstone written after `sequence`, oldest first: the one read path that
    /// sync and backup use. The device's own view reads secrets without user authentication,
    /// as the system does for backup; an app's view still asks.
    public func changes(since sequence: Int64, includingData: Bool = false,
                        authentication: AuthenticationContext = .noInteraction) throws -> [ItemChange] {
        let groupHashes = try groupsForReading(nil)?.map(accessGroupHash)
        let keys = try device.availableKeys()
        if isDeviceScope {
            // The system's own read (backup, sync): no user to ask, so rows open on every core.
            let rows = try device.database.read { db in try ItemTable.changes(db, since: sequence, accessGroupHashes: groupHashes) }
            return try ParallelMap.map(rows) { row in
                ItemChange(changeSequence: row.changeSequence, isTombstone: row.isTombstone, tombstoneDate: row.tombstoneDate,
                           record: try open(row, keys: keys, withData: includingData && !row.isTombstone))
            }
        }
        return try device.database.read { db in
            try ItemTable.changes(db, since: sequence, accessGroupHashes: groupHashes).map { row in
                let record = try open(row, keys: keys, withData: includingData && !row.isTombstone, authentication: authentication, db)
                return ItemChange(changeSequence: row.changeSequence, isTombstone: row.isTombstone,
                                  tombstoneDate: row.tombstoneDate, record: record)
            }
        }
    }

    private var isDeviceScope: Bool {
        if case .device = scope { return true }
        return false
    }
}

extension ItemTable {
    static func changes(_ db: Database, since sequence: Int64, accessGroupHashes: [[UInt8]]?) throws -> [StoredRow] {
        var sql = "SELECT \(StoredRow.columns) FROM item WHERE change_seq > ?"
        var arguments: StatementArguments = [sequence]
        if let hashes = accessGroupHashes {
            sql += " AND agrp_hash IN \(placeholders(hashes.count))"
            for hash in hashes { arguments += [Data(hash)] }
        }
        // A cursor, so that each row becomes a StoredRow without an array of GRDB rows between.
        var rows: [StoredRow] = []
        let cursor = try Row.fetchCursor(try db.cachedStatement(sql: sql + " ORDER BY change_seq"), arguments: arguments)
        while let row = try cursor.next() { rows.append(try StoredRow(row)) }
        return rows
    }
}
