import Foundation
import GRDB
import KeyferryThreads

/// The device's SQLite database: keybag, items, installed apps. One `DatabaseQueue` in WAL mode
/// with `synchronous = NORMAL`: a killed process loses no committed transaction.
/// Migrations are append-only; never edit one that has shipped.
struct KeychainDatabase: Sendable {
    let queue: DatabaseQueue
    /// The last change sequence handed out. Rows keep their own `change_seq`, so the counter is
    /// the larger of the highest row and the value saved in the keybag whenever rows are deleted
    /// (the only way the highest value could vanish); adds and updates never write it.
    private let changeCounter: ChangeCounter

    final class ChangeCounter: Sendable {
        let value: Locked<Int64>
        init(_ start: Int64) { value = Locked(start) }
    }

    init(path: String) throws {
        var configuration = Configuration()
        configuration.label = "keychain"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Freed pages are zeroed, so deleted ciphertext does not linger in the file.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // Lookups and inserts land on random pages of the UUID and primary-key indexes: at a
            // million items those indexes outgrow SQLite's default 2 MiB cache, and every write
            // went back to the file for pages it had just read.
            try db.execute(sql: "PRAGMA cache_size = -32768")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(queue)
        // A bulk load cut short (a process killed during a restore straight into a device)
        // left the unique indexes out; the rows it committed are unique, so they build.
        try queue.writeWithoutTransaction { try $0.execute(sql: Self.uniqueItemIndexes) }
        let start = try queue.read { db in
            max(
                try Int64.fetchOne(db, sql: "SELECT change_counter FROM keybag") ?? 0,
                try Int64.fetchOne(db, sql: "SELECT MAX(change_seq) FROM item") ?? 0)
        }
        changeCounter = ChangeCounter(start)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE keybag (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        salt BLOB NOT NULL,
                        kdf_operations INTEGER NOT NULL,
                        kdf_memory INTEGER NOT NULL,
                        passcode_set INTEGER NOT NULL,
                        failed_attempts INTEGER NOT NULL DEFAULT 0,
                        biometry_enrollment BLOB,
                        change_counter INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE class_key (
                        class TEXT PRIMARY KEY,
                        wrapping TEXT NOT NULL CHECK (wrapping IN ('uid', 'passcode')),
                        wrapped_key BLOB NOT NULL,
                        wrapped_metadata_key BLOB NOT NULL
                    );
                    CREATE TABLE item (
                        id INTEGER PRIMARY KEY,
                        uuid BLOB NOT NULL UNIQUE,
                        class TEXT NOT NULL,
                        pdmn TEXT NOT NULL,
                        sync INTEGER NOT NULL,
                        tomb INTEGER NOT NULL DEFAULT 0,
                        tomb_date REAL,
                        agrp_hash BLOB NOT NULL,
                        pk_hash BLOB NOT NULL UNIQUE,
                        tokens BLOB NOT NULL,
                        metadata BLOB NOT NULL,
                        secret BLOB,
                        change_seq INTEGER NOT NULL
                    );
                    CREATE INDEX item_by_change ON item (change_seq);
                    CREATE TABLE app (
                        bundle_id TEXT PRIMARY KEY,
                        team_id TEXT NOT NULL,
                        access_groups TEXT NOT NULL,
                        keychain_entitled INTEGER NOT NULL,
                        installed_at REAL NOT NULL
                    );
                    CREATE TABLE sandbox_file (
                        bundle_id TEXT NOT NULL,
                        path TEXT NOT NULL,
                        protection TEXT NOT NULL,
                        PRIMARY KEY (bundle_id, path)
                    );
                    """)
        }
        migrator.registerMigration("v2: passcode attempts") { db in
            try db.execute(
                sql: """
                    ALTER TABLE keybag ADD COLUMN last_wrong_passcode BLOB;
                    ALTER TABLE keybag ADD COLUMN last_failure_at REAL;
                    """)
        }
        migrator.registerMigration("v3: item keys") { db in
            // NULL: a format 1 row, rewritten in format 2 once its class key is in memory. The
            // partial index holds only those rows, so finding none costs nothing.
            try db.execute(
                sql: """
                    ALTER TABLE item ADD COLUMN wrapped_key BLOB;
                    CREATE INDEX item_format1 ON item (pdmn) WHERE wrapped_key IS NULL;
                    """)
        }
        migrator.registerMigration("v4: replica versions") { db in
            // The version sync holds of each item it wrote or pushed, opaque to the store.
            try db.execute(
                sql: """
                    CREATE TABLE replica (
                        uuid BLOB PRIMARY KEY,
                        version BLOB NOT NULL,
                        change_seq INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX replica_by_change ON replica (change_seq);
                    """)
        }
        migrator.registerMigration("v5: app extensions") { db in
            // The app an extension ships inside; NULL for an app.
            try db.execute(sql: "ALTER TABLE app ADD COLUMN containing_app TEXT")
        }
        migrator.registerMigration("v6: settings") { db in
            // Device settings beside the keybag's, each a JSON value by name.
            try db.execute(sql: "CREATE TABLE setting (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
        }
        migrator.registerMigration("v7: App ID prefixes, UIKit apps on a Mac") { db in
            // NULL for the team ID, as every app registered since 2011 has.
            try db.execute(sql: "ALTER TABLE app ADD COLUMN app_id_prefix TEXT")
            // 1 for Mac Catalyst or an iPhone app on a Mac.
            try db.execute(sql: "ALTER TABLE app ADD COLUMN uikit_on_mac INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v8: droppable unique indexes") { db in
            // The item table's uniqueness as named indexes instead of column constraints, which
            // SQLite cannot drop: a restore loads its rows without them and builds them once at
            // the end, from sorted keys (`Keychain.BulkLoad`). The columns keep their order.
            try db.execute(
                sql: """
                    CREATE TABLE item_v8 (
                        id INTEGER PRIMARY KEY,
                        uuid BLOB NOT NULL,
                        class TEXT NOT NULL,
                        pdmn TEXT NOT NULL,
                        sync INTEGER NOT NULL,
                        tomb INTEGER NOT NULL DEFAULT 0,
                        tomb_date REAL,
                        agrp_hash BLOB NOT NULL,
                        pk_hash BLOB NOT NULL,
                        tokens BLOB NOT NULL,
                        metadata BLOB NOT NULL,
                        secret BLOB,
                        change_seq INTEGER NOT NULL,
                        wrapped_key BLOB
                    );
                    INSERT INTO item_v8
                        SELECT id, uuid, class, pdmn, sync, tomb, tomb_date, agrp_hash, pk_hash, tokens, metadata, secret, change_seq, wrapped_key
                        FROM item;
                    DROP TABLE item;
                    ALTER TABLE item_v8 RENAME TO item;
                    CREATE INDEX item_by_change ON item (change_seq);
                    CREATE INDEX item_format1 ON item (pdmn) WHERE wrapped_key IS NULL;
                    """ + uniqueItemIndexes)
        }
        migrator.registerMigration("v9: two tiers of keys") { db in
            // Which keys open a row (SealedRow.Format). Every row written before is format 1 or
            // 2 and is sealed again in format 3 once its class key is in memory: the partial
            // index holds only those, so finding none costs nothing.
            try db.execute(
                sql: """
                    ALTER TABLE item ADD COLUMN format INTEGER NOT NULL DEFAULT 2;
                    UPDATE item SET format = 1 WHERE wrapped_key IS NULL;
                    DROP INDEX item_format1;
                    CREATE INDEX item_earlier_format ON item (pdmn) WHERE format < 3;
                    """)
        }
        return migrator
    }

    /// No two rows, live or tombstone, share a UUID or a primary key.
    static let uniqueItemIndexes = """
        CREATE UNIQUE INDEX IF NOT EXISTS item_by_uuid ON item (uuid);
        CREATE UNIQUE INDEX IF NOT EXISTS item_by_pk ON item (pk_hash);
        """

    /// Sets the unique indexes aside for a bulk load, which keeps rows unique itself.
    static let dropUniqueItemIndexes = "DROP INDEX IF EXISTS item_by_uuid; DROP INDEX IF EXISTS item_by_pk;"

    /// Runs `body` alone on the connection, with no transaction: GRDB's `read` also opens one and
    /// toggles `query_only`, re-parsing those statements on every call (most of a lookup's cost).
    /// A `DatabaseQueue` runs one closure at a time on its single connection, so no write of ours
    /// can interleave.
    ///
    /// - Warning: `body` must not write, and must be short: it holds the device's only
    ///   connection, so every other call of the device waits for it. A long read goes to
    ///   `readOnItsOwnConnection`.
    func unsafeRead<T>(_ body: (Database) throws -> T) throws -> T { try queue.unsafeRead(body) }

    /// Runs `body` in a read transaction on a connection of its own, opened for it: a snapshot
    /// of the database as it was when `body` began. For the long reads of a whole device (an
    /// export), which would otherwise hold the device's one connection from its first row to its
    /// last: in WAL mode the device goes on reading and writing meanwhile.
    func readOnItsOwnConnection<T>(_ body: (Database) throws -> T) throws -> T {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "keychain snapshot"
        return try DatabaseQueue(path: queue.path, configuration: configuration).read(body)
    }

    /// Copies the write-ahead log into the database and empties it. With secure_delete, what
    /// was deleted (an old wrapped class key) then survives in neither file. Best effort: a
    /// reader holding a snapshot (a backup) keeps the log until the next one.
    func eraseDeletedPages() {
        _ = try? queue.writeWithoutTransaction { try $0.checkpoint(.truncate) }
    }

    /// Runs `body` in one IMMEDIATE transaction: all of it commits, or none of it on a throw.
    /// The same as GRDB's `write`, with its BEGIN and COMMIT compiled once instead of per call.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try queue.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            do {
                let result = try body(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                return result
            } catch {
                if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
                throw error
            }
        }
    }

    /// Takes the next value of the device-wide change sequence. Values taken by a transaction
    /// that rolls back are skipped: the sequence has gaps but never repeats.
    func nextChangeSequence() -> Int64 {
        changeCounter.value.withLock { value in
            value += 1
            return value
        }
    }

    /// The last value handed out.
    var latestChangeSequence: Int64 { changeCounter.value.withLock { $0 } }

    /// Saves the counter before rows are deleted (inside the deleting transaction), so the
    /// highest sequence value survives the rows that carried it.
    func saveChangeCounter(_ db: Database) throws {
        try db.cachedStatement(sql: "UPDATE keybag SET change_counter = ? WHERE id = 1")
            .execute(arguments: [changeCounter.value.withLock { $0 }])
    }
}
