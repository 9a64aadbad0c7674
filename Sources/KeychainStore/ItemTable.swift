import Foundation
import GRDB
import KeychainModel
import KeyferryThreads

/// One row of the `item` table as read back: the sealed row plus its bookkeeping.
struct StoredRow: Sendable {
    var id: Int64
    var sealed: SealedRow
    var isTombstone: Bool
    var tombstoneDate: Date?
    var changeSequence: Int64

    var header: RowHeader { sealed.header }

    /// The columns `init(_:)` reads, by position: name lookups cost more than the lookup itself.
    static let columns = "id, uuid, class, pdmn, sync, tomb, tomb_date, agrp_hash, pk_hash, tokens, metadata, secret, change_seq, wrapped_key, format"

    /// The row a statement selecting `columns` stands on. Columns are read by position through
    /// GRDB's statement-level API: a `Row` would build a table of column names for every query,
    /// which costs more than a lookup by primary key itself.
    fileprivate init(id: Int64, of statement: Statement) throws {
        let s = statement.sqliteStatement
        guard let classText = String.fromStatement(s, atUncheckedIndex: 2), let itemClass = ItemClass(rawValue: classText),
            let protectionText = String.fromStatement(s, atUncheckedIndex: 3), let protection = ProtectionClass(rawValue: protectionText),
            let uuidBytes = Data.fromStatement(s, atUncheckedIndex: 1), let uuid = UUID(storedBytes: uuidBytes),
            let format = SealedRow.Format(rawValue: Int64(sqliteStatement: s, index: 14))
        else {
            throw KeychainError(.decode, "item row \(id) has an unreadable class, protection, UUID or format; the database was edited.")
        }
        func bytes(_ index: CInt) -> [UInt8] { statement.bytes(at: index) ?? [] }
        self.id = id
        let header = RowHeader(
            uuid: uuid, itemClass: itemClass, protection: protection,
            synchronizable: Int64(sqliteStatement: s, index: 4) != 0, accessGroupHash: bytes(7), primaryKeyHash: bytes(8),
            tokens: bytes(9))
        sealed = SealedRow(
            header: header, format: format, wrappedKey: Data.fromStatement(s, atUncheckedIndex: 13),
            metadata: Data.fromStatement(s, atUncheckedIndex: 10) ?? Data(),
            secret: Data.fromStatement(s, atUncheckedIndex: 11))
        isTombstone = Int64(sqliteStatement: s, index: 5) != 0
        tombstoneDate = Double.fromStatement(s, atUncheckedIndex: 6).map(Date.init(timeIntervalSinceReferenceDate:))
        changeSequence = Int64(sqliteStatement: s, index: 12)
    }

    /// The rows of `statement` (which selects `columns`), read as they are stepped. GRDB's
    /// cursor of the first column resets the statement before and after.
    static func cursor(_ statement: Statement, _ arguments: StatementArguments) throws -> some Cursor<StoredRow> {
        try Int64.fetchCursor(statement, arguments: arguments).map { try StoredRow(id: $0, of: statement) }
    }

    /// Whether the row `statement` stands on holds every one of `tokens`, read before the rest
    /// of the row so that a scan builds only the rows that match.
    static func hasTokens(_ tokens: [[UInt8]], _ statement: Statement) -> Bool {
        tokens.isEmpty || ItemIndex.tokens(statement.bytes(at: 9) ?? [], include: tokens)
    }
}

extension Statement {
    /// The blob in column `index` of the row the statement stands on, copied as one block
    /// rather than through Data's iterator.
    func bytes(at index: CInt) -> [UInt8]? {
        Data.fromStatement(sqliteStatement, atUncheckedIndex: index).map { $0.withUnsafeBytes { [UInt8]($0) } }
    }
}

/// The SQL of the `item` table, and nothing else.
enum ItemTable {
    /// Which live rows (never tombstones) a search considers before opening any of them.
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
        var limit: Int?
    }

    static func rows(_ db: Database, _ filter: Filter) throws -> [StoredRow] {
        // A primary-key hash pins the class, the group and sync already: then it is the only
        // clause that needs arguments, and the lookup binds one value instead of four.
        // Bound unchecked: `Shape` wrote one placeholder for each value.
        var values: [DatabaseValue] = []
        values.reserveCapacity(4 + (filter.primaryKeyHashes?.count ?? 0) + (filter.accessGroupHashes?.count ?? 0))
        if let hashes = filter.primaryKeyHashes {
            for hash in hashes { values.append(Data(hash).databaseValue) }
        } else {
            values.append(filter.itemClass.rawValue.databaseValue)
            for hash in filter.accessGroupHashes ?? [] { values.append(Data(hash).databaseValue) }
            if filter.synchronizable.count == 1 { values.append(filter.synchronizable[0].databaseValue) }
        }
        if let protection = filter.protection { values.append(protection.rawValue.databaseValue) }
        if let uuid = filter.uuid { values.append(uuid.bytes.databaseValue) }
        // The same query shapes repeat endlessly; compiling each once is most of the speed.
        let statement = try db.cachedStatement(sql: Shape(filter).sql)
        statement.setUncheckedArguments(StatementArguments(values))
        var found = [StoredRow]()
        let ids = try Int64.fetchCursor(statement)
        while found.count < filter.limit ?? .max, let id = try ids.next() {
            guard StoredRow.hasTokens(filter.tokens, statement) else { continue }
            found.append(try StoredRow(id: id, of: statement))
        }
        return found
    }

    /// What distinguishes one search's SQL from another's: which clauses, and how many values
    /// each `IN` list holds. The text is built once per shape.
    private struct Shape: Hashable {
        var primaryKeys: Int?
        var accessGroups: Int?
        var bySync: Bool
        var byProtection: Bool
        var byUUID: Bool

        init(_ filter: Filter) {
            primaryKeys = filter.primaryKeyHashes?.count
            accessGroups = primaryKeys == nil ? filter.accessGroupHashes?.count : nil
            bySync = primaryKeys == nil && filter.synchronizable.count == 1
            byProtection = filter.protection != nil
            byUUID = filter.uuid != nil
        }

        private static let cache = Locked<[Shape: String]>([:])

        /// Arguments bind in this order: primary-key hashes, or else class, group hashes and
        /// sync; then protection, UUID.
        var sql: String {
            if let known = Self.cache.withLock({ $0[self] }) { return known }
            var clauses = ["tomb = 0"]
            if let primaryKeys {
                clauses.append("pk_hash IN \(placeholders(primaryKeys))")
            } else {
                clauses.append("class = ?")
                if let accessGroups { clauses.append("agrp_hash IN \(placeholders(accessGroups))") }
                if bySync { clauses.append("sync = ?") }
            }
            if byProtection { clauses.append("pdmn = ?") }
            if byUUID { clauses.append("uuid = ?") }
            let text = "SELECT \(StoredRow.columns) FROM item WHERE \(clauses.joined(separator: " AND ")) ORDER BY id"
            Self.cache.withLock { $0[self] = text }
            return text
        }
    }

    /// `(?,?,…)` for an `IN` list of `count` values.
    static func placeholders(_ count: Int) -> String {
        "(" + Array(repeating: "?", count: count).joined(separator: ",") + ")"
    }

    /// The row holding a primary key, live or tombstone.
    static func holder(_ db: Database, primaryKeyHash: [UInt8]) throws -> (id: Int64, isTombstone: Bool)? {
        try Row.fetchOne(try db.cachedStatement(sql: "SELECT id, tomb FROM item WHERE pk_hash = ?"), arguments: [Data(primaryKeyHash)])
            .map { ($0["id"], $0["tomb"]) }
    }

    /// Inserts a row, or takes the place of a tombstone with the same primary key (adding over
    /// a deleted synchronizable item revives the key as a new item, last in search order).
    /// Returns false, changing nothing, when a live item holds the primary key.
    static func insert(_ db: Database, _ row: SealedRow, changeSequence: Int64) throws -> Bool {
        try execute(
            db.cachedStatement(
                sql: insertRow + """
                    ON CONFLICT (pk_hash) DO UPDATE SET
                        id = (SELECT MAX(id) FROM item) + 1, uuid = excluded.uuid, class = excluded.class, pdmn = excluded.pdmn, sync = excluded.sync,
                        tomb = 0, tomb_date = NULL, agrp_hash = excluded.agrp_hash, tokens = excluded.tokens, wrapped_key = excluded.wrapped_key,
                        metadata = excluded.metadata, secret = excluded.secret, change_seq = excluded.change_seq, format = excluded.format
                    WHERE item.tomb = 1
                    """), row, changeSequence)
        return db.changesCount > 0
    }

    /// Inserts a row whose UUID and primary key no other holds (a bulk load checked them), and
    /// returns its id: a plain insert, since the unique indexes an upsert needs are set aside.
    static func insertUnique(_ db: Database, _ row: SealedRow, changeSequence: Int64) throws -> Int64 {
        try execute(db.cachedStatement(sql: insertRow), row, changeSequence)
        return db.lastInsertedRowID
    }

    private static let insertRow = """
        INSERT INTO item (uuid, class, pdmn, sync, agrp_hash, pk_hash, tokens, wrapped_key, metadata, secret, change_seq, format)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

        """

    private static func execute(_ insert: Statement, _ row: SealedRow, _ changeSequence: Int64) throws {
        let h = row.header
        // Twelve arguments for twelve placeholders, always: GRDB's check of them is skipped.
        insert.setUncheckedArguments([
            h.uuid.bytes, h.itemClass.rawValue, h.protection.rawValue, h.synchronizable,
            Data(h.accessGroupHash), Data(h.primaryKeyHash), Data(h.tokens), row.wrappedKey, row.metadata, row.secret, changeSequence,
            row.format.rawValue,
        ])
        try insert.execute()
    }

    /// A row's `uuid` column: 16 bytes, unless the database was edited.
    static func storedUUID(_ bytes: Data) throws -> UUID {
        guard let uuid = UUID(storedBytes: bytes) else {
            throw KeychainError(.decode, "an item row has an unreadable UUID; the database was edited.")
        }
        return uuid
    }

    /// The UUID, primary key and change sequence of the row `id`, for a bulk load that replaces it.
    static func keys(_ db: Database, id: Int64) throws -> (uuid: UUID, primaryKeyHash: Data, changeSequence: Int64)? {
        let sql = "SELECT uuid, pk_hash, change_seq FROM item WHERE id = ?"
        guard let row = try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [id]) else { return nil }
        let uuid = try storedUUID(row[0])
        return (uuid, row[1], row[2])
    }

    static func replace(_ db: Database, id: Int64, with row: SealedRow, changeSequence: Int64) throws {
        let h = row.header
        try db.cachedStatement(
            sql: """
                UPDATE item SET pdmn = ?, sync = ?, agrp_hash = ?, pk_hash = ?, tokens = ?, wrapped_key = ?, metadata = ?, secret = ?,
                    change_seq = ?, format = ? WHERE id = ?
                """
        ).execute(
            arguments: [
                h.protection.rawValue, h.synchronizable, Data(h.accessGroupHash), Data(h.primaryKeyHash),
                Data(h.tokens), row.wrappedKey, row.metadata, row.secret, changeSequence, row.format.rawValue, id,
            ])
    }

    static func delete(_ db: Database, id: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [id])
    }

    /// Removes whatever holds `uuid` or the primary key, live or tombstone: what a restored or
    /// replicated item does before it takes their place.
    static func giveWay(_ db: Database, uuid: UUID, primaryKeyHash: [UInt8]) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM item WHERE uuid = ? OR pk_hash = ?")
        statement.setUncheckedArguments([uuid.bytes, Data(primaryKeyHash)])
        try statement.execute()
    }

    /// Who holds a primary key, for a replicated version that may not take its place.
    static func keyHolder(_ db: Database, primaryKeyHash: [UInt8]) throws
        -> (uuid: UUID, protection: ProtectionClass?, synchronizable: Bool, isTombstone: Bool)?
    {
        guard
            let row = try Row.fetchOne(
                try db.cachedStatement(sql: "SELECT uuid, pdmn, sync, tomb FROM item WHERE pk_hash = ?"), arguments: [Data(primaryKeyHash)])
        else { return nil }
        let uuid = try storedUUID(row[0])
        return (uuid, ProtectionClass(rawValue: row[1] as String), row[2] != 0, row[3] != 0)
    }

    /// Every item of one protection class: the `akpu` items when the passcode goes.
    static func deleteAll(_ db: Database, protection: ProtectionClass) throws {
        try db.execute(sql: "DELETE FROM item WHERE pdmn = ?", arguments: [protection.rawValue])
    }

    /// Every item that does not sync, but the device's own: what a restore replaces.
    static func deleteNonSynchronizable(_ db: Database, keepingGroup group: [UInt8]) throws {
        try db.execute(sql: "DELETE FROM item WHERE sync = 0 AND agrp_hash != ?", arguments: [Data(group)])
    }

    /// Turns a synchronizable item into a tombstone: the secret is destroyed; the sealed
    /// metadata (its primary key) stays so the delete can replicate.
    static func bury(_ db: Database, id: Int64, at date: Date, changeSequence: Int64) throws {
        try db.cachedStatement(sql: "UPDATE item SET tomb = 1, secret = NULL, tomb_date = ?, change_seq = ? WHERE id = ?")
            .execute(arguments: [date.timeIntervalSinceReferenceDate, changeSequence, id])
    }

    /// The rows after `sequence` in change order, read through a cursor so that each becomes a
    /// StoredRow without an array of GRDB rows between.
    static func changes(_ db: Database, since sequence: Int64, accessGroupHashes: [[UInt8]]?, limit: Int? = nil) throws -> some Cursor<StoredRow> {
        var sql = "SELECT \(StoredRow.columns) FROM item WHERE change_seq > ?"
        var arguments: StatementArguments = [sequence]
        if let hashes = accessGroupHashes {
            sql += " AND agrp_hash IN \(placeholders(hashes.count))"
            for hash in hashes { arguments += [Data(hash)] }
        }
        sql += " ORDER BY change_seq"
        if let limit {
            sql += " LIMIT ?"
            arguments += [limit]
        }
        return try StoredRow.cursor(try db.cachedStatement(sql: sql), arguments)
    }

    /// Rows of the given classes in a format before 3, live or tombstone (an index holds only
    /// those, so once every row is upgraded this finds nothing at once).
    static func earlierFormatRows(_ db: Database, protections: [ProtectionClass]) throws -> [StoredRow] {
        var arguments = StatementArguments()
        for protection in protections { arguments += [protection.rawValue] }
        let sql = "SELECT \(StoredRow.columns) FROM item WHERE format < 3 AND pdmn IN \(placeholders(protections.count)) ORDER BY id"
        return try Array(StoredRow.cursor(try db.makeStatement(sql: sql), arguments))
    }

    /// Writes a row's format 3 ciphertexts in place: the same item, the same change sequence.
    static func upgrade(_ db: Database, id: Int64, to row: SealedRow) throws {
        try db.cachedStatement(sql: "UPDATE item SET wrapped_key = ?, metadata = ?, secret = ?, format = ? WHERE id = ?")
            .execute(arguments: [row.wrappedKey, row.metadata, row.secret, row.format.rawValue, id])
    }

    /// Live items outside one access group (the device's own).
    static func liveCount(_ db: Database, excluding group: [UInt8]) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item WHERE tomb = 0 AND agrp_hash != ?", arguments: [Data(group)]) ?? 0
    }
}
