import Foundation
import GRDB
import KeychainModel
import KeyferryCrypto
import SyncWire

/// The relay's embedded storage: one SQLite file in WAL mode. A record's cursor is its row id;
/// a digest of its bytes keeps a retried push from being stored twice. SQLite calls block: GRDB's
/// async reads and writes run them on the database's own queue, and the caller's task waits
/// without holding a thread of the cooperative pool.
package final class SQLiteRelayStorage: RelayStorage {
    private let queue: DatabaseQueue

    /// Opens (or creates) `relay.sqlite` in `directory`.
    package init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.label = "relay"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        queue = try DatabaseQueue(path: directory.appendingPathComponent("relay.sqlite").path, configuration: configuration)
        try Self.migrator.migrate(queue)
    }

    /// Append-only; never edit a migration that has shipped.
    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE record (
                        cursor INTEGER PRIMARY KEY AUTOINCREMENT,
                        circle BLOB NOT NULL,
                        stream TEXT NOT NULL,
                        digest BLOB NOT NULL,
                        body BLOB NOT NULL
                    );
                    CREATE UNIQUE INDEX record_digest ON record (circle, stream, digest);
                    CREATE INDEX record_read ON record (circle, stream, cursor);
                    """)
        }
        // Each circle's size kept beside its records, so a quota check does not sum them.
        migrator.registerMigration("v2") { db in
            try db.execute(
                sql: """
                    CREATE TABLE circle_size (circle BLOB PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;
                    INSERT INTO circle_size (circle, bytes) SELECT circle, SUM(LENGTH(body)) FROM record GROUP BY circle;
                    """)
        }
        return migrator
    }

    package func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, ifLastIs expected: UInt64?, within limits: RelayLimits?) async throws -> Int {
        let circleBytes = circle.bytes
        return try await failing {
            try await queue.write { db in
                if let expected {
                    let last = try Int64.fetchOne(
                        db, sql: "SELECT COALESCE(MAX(cursor), 0) FROM record WHERE circle = ? AND stream = ?", arguments: [circleBytes, stream.rawValue])
                    guard last.map(UInt64.init) == expected else { throw RelayStorageConflict() }
                }
                let statement = try db.cachedStatement(sql: "INSERT OR IGNORE INTO record (circle, stream, digest, body) VALUES (?, ?, ?, ?)")
                var added = 0
                var size = 0
                for body in bodies {
                    try statement.execute(arguments: [circleBytes, stream.rawValue, Data(ContentDigest.of(body)), Data(body)])
                    if db.changesCount > 0 {
                        added += 1
                        size += body.count
                    }
                }
                guard added > 0 else { return 0 }
                if let limits {
                    let held = try Int.fetchOne(db, sql: "SELECT bytes FROM circle_size WHERE circle = ?", arguments: [circleBytes])
                    try RelayStorageFull.check(
                        limits, circle: circle, stream: stream, held: held,
                        circles: held == nil ? try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM circle_size") : nil,
                        total: try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(bytes), 0) FROM circle_size") ?? 0, adding: size)
                }
                try db.execute(
                    sql: "INSERT INTO circle_size (circle, bytes) VALUES (?, ?) ON CONFLICT (circle) DO UPDATE SET bytes = bytes + excluded.bytes",
                    arguments: [circleBytes, size])
                return added
            }
        }
    }

    package func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        try await failing {
            try await queue.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT cursor, body FROM record WHERE circle = ? AND stream = ? AND cursor > ? ORDER BY cursor LIMIT ?",
                    arguments: [circle.bytes, stream.rawValue, Int64(clamping: cursor), limit]
                )
                .map { RelayRecord(cursor: UInt64($0[0] as Int64), body: [UInt8]($0[1] as Data)) }
            }
        }
    }

    package func byteCount(circle: UUID) async throws -> Int {
        try await failing {
            try await queue.read { db in
                try Int.fetchOne(db, sql: "SELECT bytes FROM circle_size WHERE circle = ?", arguments: [circle.bytes]) ?? 0
            }
        }
    }

    /// SQLite's failures (a full disk, a damaged file) as the relay reports a storage's.
    private func failing<Result>(_ work: () async throws -> Result) async throws -> Result {
        do {
            return try await work()
        } catch let error as DatabaseError {
            throw RelayStorageError("\(error.message ?? "\(error.resultCode)") (SQLite \(error.resultCode))")
        }
    }

}
