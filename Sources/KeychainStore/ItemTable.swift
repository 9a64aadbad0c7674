import Foundation
import GRDB
import KeychainModel

/// One row of the `item` table as read back: the sealed row plus its bookkeeping.
struct StoredRow {
    var id: Int64
    var sealed: SealedRow
    var isTombstone: Bool
    var tombstoneDate: Date?
    var changeSequence: Int64

    var header: RowHeader { sealed.header }

    init(_ row: Row) throws {
        guard let itemClass = ItemClass(rawValue: row["class"]), let protection = ProtectionClass(rawValue: row["pdmn"]),
              let uuidData = row["uuid"] as Data?, uuidData.count == 16 else {
            throw KeychainError(.decode, "item row \(row["id"] as Int64? ?? -1) has an unreadable class, protection or UUID; the database was edited.")
        }
        id = row["id"]
        let header = RowHeader(
            uuid: UUIDBytes.uuid([UInt8](uuidData)), itemClass: itemClass, protection: protection, synchronizable: row["sync"],
            accessGroupHash: [UInt8](row["agrp_hash"] as Data), primaryKeyHash: [UInt8](row["pk_hash"] as Data),
            tokens: [UInt8](row["tokens"] as Data))
        sealed = SealedRow(header: header, metadata: row["metadata"], secret: row["secret"])
        isTombstone = row["tomb"]
        tombstoneDate = (row["tomb_date"] as Double?).map(Date.init(timeIntervalSinceReferenceDate:))
        changeSequence = row["change_seq"]
    }
}

/// The SQL of the `item` table, and nothing else.
enum ItemTable {
    /// Which rows a search considers before opening any of them.
    struct Filter {
        var itemClass: ItemClass
        var synchronizable: [Bool] = [false, true]
        /// nil: any group (the device's own view).
        var accessGroupHashes: [[UInt8]]?
        /// Set when the search names a whole primary key: an indexed lookup instead of a scan.
        var primaryKeyHashes: [[UInt8]]?
        var protection: ProtectionClass?
        var uuid: UUID?
        var tokens: [[UInt8]] = []
        var includeTombstones = false
        var limit: Int?
    }

    static func rows(_ db: Database, _ filter: Filter) throws -> [StoredRow] {
        var clauses = ["class = ?"]
        var arguments: StatementArguments = [filter.itemClass.rawValue]
        func list(_ column: String, _ values: [some DatabaseValueConvertible]) {
            clauses.append("\(column) IN (\(Array(repeating: "?", count: values.count).joined(separator: ",")))")
            for value in values { arguments += [value] }
        }
        if !filter.includeTombstones { clauses.append("tomb = 0") }
        if let hashes = filter.primaryKeyHashes { list("pk_hash", hashes.map { Data($0) }) }
        if let hashes = filter.accessGroupHashes { list("agrp_hash", hashes.map { Data($0) }) }
        if filter.synchronizable.count == 1 { list("sync", filter.synchronizable) }
        if let protection = filter.protection { list("pdmn", [protection.rawValue]) }
        if let uuid = filter.uuid { list("uuid", [UUIDBytes.bytes(uuid)]) }
        let sql = "SELECT * FROM item WHERE \(clauses.joined(separator: " AND ")) ORDER BY id"
        var found = [StoredRow]()
        let cursor = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try cursor.next() {
            let tokens = [UInt8](row["tokens"] as Data)
            guard ItemIndex.tokens(tokens, include: filter.tokens) else { continue }
            found.append(try StoredRow(row))
            if let limit = filter.limit, found.count >= limit { break }
        }
        return found
    }

    /// The row holding a primary key, live or tombstone.
    static func holder(_ db: Database, primaryKeyHash: [UInt8]) throws -> (id: Int64, isTombstone: Bool)? {
        try Row.fetchOne(db, sql: "SELECT id, tomb FROM item WHERE pk_hash = ?", arguments: [Data(primaryKeyHash)])
            .map { ($0["id"], $0["tomb"]) }
    }

    static func insert(_ db: Database, _ row: SealedRow, changeSequence: Int64) throws {
        let h = row.header
        try db.execute(
            sql: """
                INSERT INTO item (uuid, class, pdmn, sync, agrp_hash, pk_hash, tokens, metadata, secret, change_seq)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [UUIDBytes.bytes(h.uuid), h.itemClass.rawValue, h.protection.rawValue, h.synchronizable,
                        Data(h.accessGroupHash), Data(h.primaryKeyHash), Data(h.tokens), row.metadata, row.secret, changeSequence])
    }

    static func replace(_ db: Database, id: Int64, with row: SealedRow, changeSequence: Int64) throws {
        let h = row.header
        try db.execute(
            sql: """
                UPDATE item SET pdmn = ?, sync = ?, agrp_hash = ?, pk_hash = ?, tokens = ?, metadata = ?, secret = ?,
                    change_seq = ? WHERE id = ?
                """,
            arguments: [h.protection.rawValue, h.synchronizable, Data(h.accessGroupHash), Data(h.primaryKeyHash),
                        Data(h.tokens), row.metadata, row.secret, changeSequence, id])
    }

    static func delete(_ db: Database, id: Int64) throws {
        try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id])
    }

    /// Turns a synchronizable item into a tombstone: the secret is destroyed; the sealed
    /// metadata (its primary key) stays so the delete can replicate.
    static func bury(_ db: Database, id: Int64, at date: Date, changeSequence: Int64) throws {
        try db.execute(
            sql: "UPDATE item SET tomb = 1, secret = NULL, tomb_date = ?, change_seq = ? WHERE id = ?",
            arguments: [date.timeIntervalSinceReferenceDate, changeSequence, id])
    }
}
