import Foundation
import GRDB

/// The device's SQLite database: keybag, items, installed apps. One `DatabaseQueue` in WAL mode
/// with `synchronous = NORMAL`: a killed process loses no committed transaction.
/// Migrations are append-only; never edit one that has shipped.
struct KeychainDatabase: Sendable {
    let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.label = "keychain"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Freed pages are zeroed, so deleted ciphertext does not linger in the file.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(queue)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
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
                CREATE INDEX item_by_scope ON item (class, agrp_hash);
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
        return migrator
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T { try queue.read(body) }
    func write<T>(_ body: (Database) throws -> T) throws -> T { try queue.write(body) }

    /// Takes the next value of the device-wide change sequence (inside the caller's transaction).
    static func nextChangeSequence(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "UPDATE keybag SET change_counter = change_counter + 1 RETURNING change_counter")!
    }
}
