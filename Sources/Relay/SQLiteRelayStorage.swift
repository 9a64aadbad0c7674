package import Foundation
import GRDB
import KeychainModel
import KeyferryCrypto
package import SyncWire

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
        // What compaction decides by: each batch's author and sequence (0 for a compaction
        // note), and each item's newest versions with the record that holds them.
        migrator.registerMigration("v3") { db in
            try db.execute(
                sql: """
                    ALTER TABLE record ADD COLUMN author BLOB;
                    ALTER TABLE record ADD COLUMN sequence INTEGER;
                    CREATE INDEX record_author ON record (circle, author, sequence) WHERE author IS NOT NULL;
                    CREATE TABLE live_version (
                        circle BLOB NOT NULL,
                        item BLOB NOT NULL,
                        cursor INTEGER NOT NULL,
                        milliseconds INTEGER NOT NULL,
                        counter INTEGER NOT NULL,
                        tombstone INTEGER NOT NULL,
                        epoch INTEGER NOT NULL,
                        PRIMARY KEY (circle, item, cursor)
                    ) WITHOUT ROWID;
                    CREATE INDEX live_version_cursor ON live_version (cursor);
                    CREATE TABLE acknowledgement (
                        circle BLOB NOT NULL,
                        member BLOB NOT NULL,
                        cursor INTEGER NOT NULL,
                        time REAL NOT NULL,
                        PRIMARY KEY (circle, member)
                    ) WITHOUT ROWID;
                    ALTER TABLE circle_size ADD COLUMN resync_below INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        return migrator
    }

    package func append(
        _ bodies: [[UInt8]], facts: [BatchFacts]?, circle: UUID, stream: RelayStream, ifLastIs expected: UInt64?, within limits: RelayLimits?
    ) async throws -> Int {
        let circleBytes = circle.bytes
        return try await failing {
            try await queue.write { db in
                if let expected {
                    let last = try Int64.fetchOne(
                        db, sql: "SELECT COALESCE(MAX(cursor), 0) FROM record WHERE circle = ? AND stream = ?", arguments: [circleBytes, stream.rawValue])
                    guard last.map(UInt64.init) == expected else { throw RelayStorageConflict() }
                }
                let statement = try db.cachedStatement(
                    sql: "INSERT OR IGNORE INTO record (circle, stream, digest, body, author, sequence) VALUES (?, ?, ?, ?, ?, ?)")
                var added = 0
                var size = 0
                var candidates = Set<Int64>()
                for (index, body) in bodies.enumerated() {
                    let fact = facts?[index]
                    try statement.execute(arguments: [
                        circleBytes, stream.rawValue, Data(ContentDigest.of(body)), Data(body), fact.map { Data($0.author) },
                        fact.map { Int64(clamping: $0.sequence) },
                    ])
                    guard db.changesCount > 0 else { continue }
                    added += 1
                    size += body.count
                    if let fact { candidates.formUnion(try Self.supersede(with: fact, at: db.lastInsertedRowID, circle: circleBytes, db)) }
                }
                guard added > 0 else { return 0 }
                size += try Self.compact(candidates, circle: circle, db)
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

    /// Makes the batch at `cursor` hold its items' newest versions (ties with another batch
    /// keep both, since members break them by what the relay cannot see); returns the records
    /// that may now hold none: those it superseded, the author's batch before it, and itself.
    private static func supersede(with fact: BatchFacts, at cursor: Int64, circle: Data, _ db: Database) throws -> Set<Int64> {
        var candidates: Set<Int64> = [cursor]
        let newer = try db.cachedStatement(
            sql: "SELECT 1 FROM live_version WHERE circle = ? AND item = ? AND (milliseconds > ? OR (milliseconds = ? AND counter > ?)) LIMIT 1")
        let older = try db.cachedStatement(
            sql: "DELETE FROM live_version WHERE circle = ? AND item = ? AND (milliseconds < ? OR (milliseconds = ? AND counter < ?)) RETURNING cursor")
        let keep = try db.cachedStatement(sql: "INSERT OR IGNORE INTO live_version VALUES (?, ?, ?, ?, ?, ?, ?)")
        for version in fact.versions {
            let item = version.item.bytes
            let milliseconds = Int64(clamping: version.version.milliseconds)
            let arguments: StatementArguments = [circle, item, milliseconds, milliseconds, Int64(version.version.counter)]
            guard try Int.fetchOne(newer, arguments: arguments) == nil else { continue }
            candidates.formUnion(try Int64.fetchAll(older, arguments: arguments))
            try keep.execute(arguments: [circle, item, cursor, milliseconds, Int64(version.version.counter), version.isTombstone, Int64(version.epoch)])
        }
        let previous = try Int64.fetchOne(
            db, sql: "SELECT cursor FROM record WHERE circle = ? AND author = ? AND sequence BETWEEN 1 AND ? - 1 ORDER BY sequence DESC LIMIT 1",
            arguments: [circle, Data(fact.author), Int64(clamping: fact.sequence)])
        if let previous { candidates.insert(previous) }
        return candidates
    }

    /// Drops the batches among `candidates` that hold no newest version and are not their
    /// author's newest, and appends each author's note anew; returns the change in bytes.
    private static func compact(_ candidates: Set<Int64>, circle: UUID, _ db: Database) throws -> Int {
        let circleBytes = circle.bytes
        var dropped: [Data: [(cursor: Int64, sequence: UInt64, bytes: Int)]] = [:]
        for cursor in candidates.sorted() {
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT author, sequence, LENGTH(body) FROM record WHERE cursor = ? AND circle = ? AND sequence > 0",
                    arguments: [cursor, circleBytes]),
                let author = row[0] as Data?
            else { continue }
            let sequence = row[1] as Int64
            guard try Int.fetchOne(db, sql: "SELECT 1 FROM live_version WHERE cursor = ? LIMIT 1", arguments: [cursor]) == nil,
                try Int.fetchOne(
                    db, sql: "SELECT 1 FROM record WHERE circle = ? AND author = ? AND sequence > ? LIMIT 1", arguments: [circleBytes, author, sequence])
                    != nil
            else { continue }
            dropped[author, default: []].append((cursor, UInt64(sequence), row[2]))
        }
        var change = 0
        for (author, batches) in dropped {
            let held = try Row.fetchOne(
                db, sql: "SELECT cursor, body FROM record WHERE circle = ? AND author = ? AND sequence = 0", arguments: [circleBytes, author])
            let heldBody = held.map { [UInt8]($0[1] as Data) }
            // Past the note's most ranges the batches stay: bytes kept, never a gap unexplained.
            guard let note = BatchFacts.note(heldBody, circle: circle, author: [UInt8](author), adding: batches.map(\.sequence)) else { continue }
            for batch in batches {
                try db.execute(sql: "DELETE FROM record WHERE cursor = ?", arguments: [batch.cursor])
                change -= batch.bytes
            }
            if let held, let heldBody {
                try db.execute(sql: "DELETE FROM record WHERE cursor = ?", arguments: [held[0] as Int64])
                change -= heldBody.count
            }
            try db.execute(
                sql: "INSERT INTO record (circle, stream, digest, body, author, sequence) VALUES (?, ?, ?, ?, ?, 0)",
                arguments: [circleBytes, RelayStream.envelopes.rawValue, Data(ContentDigest.of(note)), Data(note), author])
            change += note.count
        }
        return change
    }

    package func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        try await failing {
            try await queue.read { db in try Self.records(db, circle: circle, stream: stream, after: cursor, limit: limit) }
        }
    }

    private static func records(_ db: Database, circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) throws -> [RelayRecord] {
        try Row.fetchAll(
            db, sql: "SELECT cursor, body FROM record WHERE circle = ? AND stream = ? AND cursor > ? ORDER BY cursor LIMIT ?",
            arguments: [circle.bytes, stream.rawValue, Int64(clamping: cursor), limit]
        )
        .map { RelayRecord(cursor: UInt64($0[0] as Int64), body: [UInt8]($0[1] as Data)) }
    }

    package func byteCount(circle: UUID) async throws -> Int {
        try await failing {
            try await queue.read { db in
                try Int.fetchOne(db, sql: "SELECT bytes FROM circle_size WHERE circle = ?", arguments: [circle.bytes]) ?? 0
            }
        }
    }

    package func acknowledge(
        circle: UUID, member: [UInt8], through cursor: UInt64, members: [[UInt8]], retention: TimeInterval, now: Date
    ) async throws {
        let circleBytes = circle.bytes
        try await failing {
            try await queue.write { db in
                let time = now.timeIntervalSince1970
                try db.execute(
                    sql: """
                        INSERT INTO acknowledgement VALUES (?, ?, ?, ?)
                        ON CONFLICT (circle, member) DO UPDATE SET cursor = MAX(cursor, excluded.cursor), time = excluded.time
                        """, arguments: [circleBytes, Data(member), Int64(clamping: cursor), time])
                // A member heard from for the first time is counted from now.
                var floor = Int64.max
                for other in members {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO acknowledgement VALUES (?, ?, 0, ?)", arguments: [circleBytes, Data(other), time])
                    let row = try Row.fetchOne(
                        db, sql: "SELECT cursor, time FROM acknowledgement WHERE circle = ? AND member = ?", arguments: [circleBytes, Data(other)])
                    if let row, (row[1] as Double) >= time - retention { floor = min(floor, row[0] as Int64) }
                }
                let forgotten = try Row.fetchAll(
                    db, sql: "SELECT item, cursor FROM live_version WHERE circle = ? AND tombstone = 1 AND cursor BETWEEN 1 AND ?",
                    arguments: [circleBytes, floor])
                guard !forgotten.isEmpty else { return }
                var candidates = Set<Int64>()
                for row in forgotten {
                    let (item, at) = (row[0] as Data, row[1] as Int64)
                    // The version stays known, held by no record: an older one arriving late is still superseded.
                    try db.execute(
                        sql: "UPDATE OR REPLACE live_version SET cursor = 0 WHERE circle = ? AND item = ? AND cursor = ?", arguments: [circleBytes, item, at])
                    candidates.insert(at)
                }
                let change = try Self.compact(candidates, circle: circle, db)
                try db.execute(
                    sql: "UPDATE circle_size SET bytes = bytes + ?, resync_below = MAX(resync_below, ?) WHERE circle = ?",
                    arguments: [change, candidates.max()!, circleBytes])
            }
        }
    }

    package func envelopes(circle: UUID, after cursor: UInt64, limit: Int) async throws -> (records: [RelayRecord], resyncFloor: UInt64) {
        try await failing {
            try await queue.read { db in
                let floor = try Int64.fetchOne(db, sql: "SELECT resync_below FROM circle_size WHERE circle = ?", arguments: [circle.bytes]) ?? 0
                return (try Self.records(db, circle: circle, stream: .envelopes, after: cursor, limit: limit), UInt64(floor))
            }
        }
    }

    package func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] {
        try await failing {
            try await queue.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT item, milliseconds, counter FROM live_version WHERE circle = ? AND cursor = 0 AND tombstone = 1 AND item > ?
                        ORDER BY item LIMIT ?
                        """, arguments: [circle.bytes, item?.bytes ?? Data(), limit]
                )
                .compactMap { row in
                    UUID(storedBytes: [UInt8](row[0] as Data)).map {
                        ForgottenDeletion(
                            item: $0, version: HybridTimestamp(milliseconds: UInt64(clamping: row[1] as Int64), counter: UInt32(clamping: row[2] as Int64)))
                    }
                }
            }
        }
    }

    package func liveGenerations(circle: UUID) async throws -> Set<UInt32>? {
        try await failing {
            try await queue.read { db in
                let unread = try Int.fetchOne(
                    db, sql: "SELECT 1 FROM record WHERE circle = ? AND stream = 'envelopes' AND author IS NULL LIMIT 1", arguments: [circle.bytes])
                guard unread == nil else { return nil }
                return Set(
                    try Int64.fetchAll(db, sql: "SELECT DISTINCT epoch FROM live_version WHERE circle = ? AND cursor > 0", arguments: [circle.bytes])
                        .map { UInt32(clamping: $0) })
            }
        }
    }

    package func remove(circle: UUID, stream: RelayStream, cursors: [UInt64]) async throws {
        let circleBytes = circle.bytes
        try await failing {
            try await queue.write { db in
                var freed = 0
                for cursor in cursors {
                    let length = try Int.fetchOne(
                        db, sql: "DELETE FROM record WHERE cursor = ? AND circle = ? AND stream = ? RETURNING LENGTH(body)",
                        arguments: [Int64(clamping: cursor), circleBytes, stream.rawValue])
                    freed += length ?? 0
                }
                try db.execute(sql: "UPDATE circle_size SET bytes = bytes - ? WHERE circle = ?", arguments: [freed, circleBytes])
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
