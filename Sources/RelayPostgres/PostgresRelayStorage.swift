package import Foundation
import KeychainModel
import KeyferryCrypto
package import Logging
import PostgresNIO
package import Relay
package import SyncWire

/// A relay's storage on PostgreSQL, which several relays share: everything a relay decides by
/// (the logs, each stream's newest cursor, each circle's size) is in the database.
///
/// Appends to one stream take its row in `relay_stream` for update, number their records
/// after the newest, and commit before the next append may number its own: cursors grow in
/// commit order, so a reader never sees a cursor before a smaller one is committed.
package final class PostgresRelayStorage: RelayStorage {
    private let client: PostgresClient
    private let logger: Logger

    private init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Connects to `database`, creates or migrates the schema, and runs `body` with the storage;
    /// the connections close when it returns.
    package static func withStorage<Result: Sendable>(
        _ database: PostgresRelayDatabase, logger: Logger = Logger(label: "keyferry.relay.postgres") { _ in SwiftLogNoOpLogHandler() },
        _ body: (PostgresRelayStorage) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(configuration: database.configuration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let storage = PostgresRelayStorage(client: client, logger: logger)
            // The pool would retry a refused or unauthorized connection for ever: one connection
            // of its own says at once why the database cannot be used.
            try await storage.failing("cannot reach \(database)") {
                let connection = try await PostgresConnection.connect(configuration: try database.connectionConfiguration(), id: 0, logger: logger)
                try await connection.close()
            }
            try await storage.failing("cannot prepare \(database)") { try await storage.migrate() }
            return try await body(storage)
        }
    }

    // MARK: Schema

    /// Each version's statements; append-only, never edit one that has shipped.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE relay_stream (
                circle UUID NOT NULL, stream TEXT NOT NULL, last_cursor BIGINT NOT NULL,
                PRIMARY KEY (circle, stream))
            """,
            """
            CREATE TABLE relay_record (
                circle UUID NOT NULL, stream TEXT NOT NULL, cursor BIGINT NOT NULL, digest BYTEA NOT NULL, body BYTEA NOT NULL,
                PRIMARY KEY (circle, stream, cursor), UNIQUE (circle, stream, digest))
            """,
            "CREATE TABLE relay_circle (circle UUID PRIMARY KEY, bytes BIGINT NOT NULL)",
        ],
        // What compaction decides by: each batch's author and sequence (0 for a compaction
        // note), and each item's newest versions with the record that holds them.
        [
            "ALTER TABLE relay_record ADD COLUMN author BYTEA, ADD COLUMN sequence BIGINT",
            "CREATE INDEX relay_record_author ON relay_record (circle, author, sequence) WHERE author IS NOT NULL",
            """
            CREATE TABLE relay_live_version (
                circle UUID NOT NULL, item UUID NOT NULL, cursor BIGINT NOT NULL,
                milliseconds BIGINT NOT NULL, counter BIGINT NOT NULL, tombstone BOOLEAN NOT NULL, epoch BIGINT NOT NULL,
                PRIMARY KEY (circle, item, cursor))
            """,
            "CREATE INDEX relay_live_version_cursor ON relay_live_version (circle, cursor)",
            """
            CREATE TABLE relay_acknowledgement (
                circle UUID NOT NULL, member BYTEA NOT NULL, cursor BIGINT NOT NULL, time DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (circle, member))
            """,
            "ALTER TABLE relay_circle ADD COLUMN resync_below BIGINT NOT NULL DEFAULT 0",
        ],
    ]

    /// The schema's version, in a table of its own.
    static var schemaVersion: Int { migrations.count }

    private func migrate() async throws {
        try await client.withTransaction(logger: logger) { connection in
            // Relays starting together migrate one after the other.
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS keyferry_relay_schema (version INTEGER NOT NULL)", logger: logger)
            let version =
                try await Self.first(
                    Int.self, connection.query("SELECT COALESCE(MAX(version), 0)::INTEGER FROM keyferry_relay_schema", logger: logger)) ?? 0
            guard version <= Self.schemaVersion else {
                throw RelayStorageError(
                    "its relay schema is version \(version), newer than this Keyferry's \(Self.schemaVersion): run a newer keyferry")
            }
            for (index, statements) in Self.migrations.enumerated() where index >= version {
                for sql in statements { try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
                try await connection.query("INSERT INTO keyferry_relay_schema (version) VALUES (\(index + 1))", logger: logger)
            }
        }
    }

    /// An arbitrary constant naming the migration lock among the database's advisory locks.
    private static let migrationLock: Int64 = 0x6b66_7279_6c61_7931

    // MARK: RelayStorage

    package func append(
        _ bodies: [[UInt8]], facts: [BatchFacts]?, circle: UUID, stream: RelayStream, ifLastIs expected: UInt64?, within limits: RelayLimits?
    ) async throws -> Int {
        try await failing("cannot append to circle \(circle)") { [self] in
            try await client.withTransaction(logger: logger) { connection in
                let name = stream.rawValue
                try await connection.query(
                    "INSERT INTO relay_stream (circle, stream, last_cursor) VALUES (\(circle), \(name), 0) ON CONFLICT DO NOTHING", logger: logger)
                var last =
                    try await Self.first(
                        Int64.self,
                        connection.query(
                            "SELECT last_cursor FROM relay_stream WHERE circle = \(circle) AND stream = \(name) FOR UPDATE", logger: logger)) ?? 0
                if let expected, UInt64(last) != expected { throw RelayStorageConflict() }
                var added = 0
                var size = 0
                var candidates = Set<Int64>()
                for (index, body) in bodies.enumerated() {
                    let fact = facts?[index]
                    let inserted = try await Self.first(
                        Int64.self,
                        connection.query(
                            """
                            INSERT INTO relay_record (circle, stream, cursor, digest, body, author, sequence)
                            VALUES (\(circle), \(name), \(last + 1), \(Data(ContentDigest.of(body))), \(Data(body)),
                                \(fact.map { Data($0.author) }), \(fact.map { Int64(clamping: $0.sequence) }))
                            ON CONFLICT (circle, stream, digest) DO NOTHING RETURNING cursor
                            """, logger: logger))
                    guard inserted != nil else { continue }
                    last += 1
                    added += 1
                    size += body.count
                    if let fact { candidates.formUnion(try await supersede(with: fact, at: last, circle: circle, connection)) }
                }
                guard added > 0 else { return 0 }
                size += try await compact(candidates, circle: circle, last: &last, connection)
                if let limits {
                    // The circle's size row, held until the commit: appends to one circle check
                    // its quota one after another, on every relay of the database.
                    let held = try await Self.first(
                        Int64.self, connection.query("SELECT bytes FROM relay_circle WHERE circle = \(circle) FOR UPDATE", logger: logger))
                    let circles = held == nil ? try await Self.first(Int64.self, connection.query("SELECT COUNT(*) FROM relay_circle", logger: logger)) : nil
                    let total = try await Self.first(Int64.self, connection.query("SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM relay_circle", logger: logger))
                    try RelayStorageFull.check(
                        limits, circle: circle, stream: stream, held: held.map(Int.init), circles: circles.map(Int.init), total: Int(total ?? 0),
                        adding: size)
                }
                try await connection.query(
                    "UPDATE relay_stream SET last_cursor = \(last) WHERE circle = \(circle) AND stream = \(name)", logger: logger)
                try await connection.query(
                    """
                    INSERT INTO relay_circle (circle, bytes) VALUES (\(circle), \(Int64(size)))
                    ON CONFLICT (circle) DO UPDATE SET bytes = relay_circle.bytes + excluded.bytes
                    """, logger: logger)
                return added
            }
        }
    }

    /// Makes the batch at `cursor` hold its items' newest versions (ties with another batch
    /// keep both, since members break them by what the relay cannot see); returns the records
    /// that may now hold none: those it superseded, the author's batch before it, and itself.
    /// One statement, one round trip.
    private func supersede(with fact: BatchFacts, at cursor: Int64, circle: UUID, _ connection: PostgresConnection) async throws -> Set<Int64> {
        var candidates: Set<Int64> = [cursor]
        let items = fact.versions.map(\.item)
        let milliseconds = fact.versions.map { Int64(clamping: $0.version.milliseconds) }
        let counters = fact.versions.map { Int64($0.version.counter) }
        let tombstones = fact.versions.map(\.isTombstone)
        let epochs = fact.versions.map { Int64($0.epoch) }
        let superseded = try await connection.query(
            """
            WITH incoming (item, milliseconds, counter, tombstone, epoch) AS (
                SELECT * FROM unnest(
                    \(items)::uuid[], \(milliseconds)::bigint[], \(counters)::bigint[], \(tombstones)::boolean[], \(epochs)::bigint[])),
            kept AS (
                SELECT i.* FROM incoming i WHERE NOT EXISTS (
                    SELECT 1 FROM relay_live_version l WHERE l.circle = \(circle) AND l.item = i.item
                    AND (l.milliseconds, l.counter) > (i.milliseconds, i.counter))),
            superseded AS (
                DELETE FROM relay_live_version l USING kept k
                WHERE l.circle = \(circle) AND l.item = k.item AND (l.milliseconds, l.counter) < (k.milliseconds, k.counter)
                RETURNING l.cursor),
            added AS (
                INSERT INTO relay_live_version (circle, item, cursor, milliseconds, counter, tombstone, epoch)
                SELECT \(circle), item, \(cursor), milliseconds, counter, tombstone, epoch FROM kept ON CONFLICT DO NOTHING)
            SELECT cursor FROM superseded
            UNION
            SELECT cursor FROM (
                SELECT cursor FROM relay_record WHERE circle = \(circle) AND stream = 'envelopes' AND author = \(Data(fact.author))
                AND sequence BETWEEN 1 AND \(Int64(clamping: fact.sequence)) - 1 ORDER BY sequence DESC LIMIT 1) previous
            """, logger: logger)
        for try await older in superseded.decode(Int64.self) { candidates.insert(older) }
        return candidates
    }

    /// Drops the batches among `candidates` that hold no newest version and are not their
    /// author's newest, and appends each author's note anew after `last`; returns the change
    /// in bytes.
    private func compact(_ candidates: Set<Int64>, circle: UUID, last: inout Int64, _ connection: PostgresConnection) async throws -> Int {
        guard !candidates.isEmpty else { return 0 }
        let rows = try await connection.query(
            """
            SELECT r.cursor, r.author, r.sequence, length(r.body)::BIGINT FROM relay_record r
            WHERE r.circle = \(circle) AND r.stream = 'envelopes' AND r.cursor = ANY(\(Array(candidates))::bigint[]) AND r.sequence > 0
            AND NOT EXISTS (SELECT 1 FROM relay_live_version l WHERE l.circle = r.circle AND l.cursor = r.cursor)
            AND EXISTS (
                SELECT 1 FROM relay_record n WHERE n.circle = r.circle AND n.stream = r.stream AND n.author = r.author AND n.sequence > r.sequence)
            """, logger: logger)
        var dropped: [Data: [(cursor: Int64, sequence: UInt64, bytes: Int)]] = [:]
        for try await (cursor, author, sequence, bytes) in rows.decode((Int64, Data, Int64, Int64).self) {
            dropped[author, default: []].append((cursor, UInt64(sequence), Int(bytes)))
        }
        var change = 0
        for (author, batches) in dropped {
            var held: (cursor: Int64, body: [UInt8])?
            for try await (cursor, body) in try await connection.query(
                """
                SELECT cursor, body FROM relay_record WHERE circle = \(circle) AND stream = 'envelopes' AND author = \(author) AND sequence = 0
                """, logger: logger
            ).decode((Int64, ByteBuffer).self) {
                held = (cursor, Array(buffer: body))
            }
            // Past the note's most ranges the batches stay: bytes kept, never a gap unexplained.
            guard let note = BatchFacts.note(held?.body, circle: circle, author: [UInt8](author), adding: batches.map(\.sequence)) else { continue }
            let gone = batches.map(\.cursor) + (held.map { [$0.cursor] } ?? [])
            try await connection.query(
                "DELETE FROM relay_record WHERE circle = \(circle) AND stream = 'envelopes' AND cursor = ANY(\(gone)::bigint[])", logger: logger)
            change -= batches.reduce(0) { $0 + $1.bytes } + (held?.body.count ?? 0)
            last += 1
            try await connection.query(
                """
                INSERT INTO relay_record (circle, stream, cursor, digest, body, author, sequence)
                VALUES (\(circle), 'envelopes', \(last), \(Data(ContentDigest.of(note))), \(Data(note)), \(author), 0)
                """, logger: logger)
            change += note.count
        }
        return change
    }

    package func acknowledge(
        circle: UUID, member: [UInt8], through cursor: UInt64, members: [[UInt8]], retention: TimeInterval, now: Date
    ) async throws {
        try await failing("cannot acknowledge for circle \(circle)") { [self] in
            try await client.withTransaction(logger: logger) { connection in
                // The stream's row, as an append holds it: acknowledgements and appends of a
                // circle compact one after another, whichever relay took them.
                let held = try await Self.first(
                    Int64.self,
                    connection.query(
                        "SELECT last_cursor FROM relay_stream WHERE circle = \(circle) AND stream = 'envelopes' FOR UPDATE", logger: logger))
                guard var last = held else { return }
                let time = now.timeIntervalSince1970
                try await connection.query(
                    """
                    INSERT INTO relay_acknowledgement VALUES (\(circle), \(Data(member)), \(Int64(clamping: cursor)), \(time))
                    ON CONFLICT (circle, member) DO UPDATE
                    SET cursor = GREATEST(relay_acknowledgement.cursor, excluded.cursor), time = excluded.time
                    """, logger: logger)
                // Keys as hex: PostgresNIO binds no array of bytes.
                let keys = members.map { Hex.encode($0) }
                try await connection.query(
                    """
                    INSERT INTO relay_acknowledgement SELECT \(circle), decode(m, 'hex'), 0, \(time) FROM unnest(\(keys)::text[]) AS m
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
                // A member heard from for the first time is counted from now.
                let floor =
                    try await Self.first(
                        Int64.self,
                        connection.query(
                            """
                            SELECT MIN(cursor) FROM relay_acknowledgement
                            WHERE circle = \(circle) AND encode(member, 'hex') = ANY(\(keys)::text[]) AND time >= \(time - retention)
                            """, logger: logger)) ?? Int64.max
                let forgotten = try await connection.query(
                    """
                    WITH gone AS (
                        DELETE FROM relay_live_version
                        WHERE circle = \(circle) AND tombstone AND cursor BETWEEN 1 AND \(floor)
                        RETURNING item, cursor, milliseconds, counter, epoch),
                    kept AS (
                        INSERT INTO relay_live_version (circle, item, cursor, milliseconds, counter, tombstone, epoch)
                        SELECT \(circle), item, 0, milliseconds, counter, TRUE, epoch FROM gone ON CONFLICT DO NOTHING)
                    SELECT DISTINCT cursor FROM gone
                    """, logger: logger)
                var candidates = Set<Int64>()
                for try await at in forgotten.decode(Int64.self) { candidates.insert(at) }
                guard let highest = candidates.max() else { return }
                let change = try await compact(candidates, circle: circle, last: &last, connection)
                try await connection.query(
                    "UPDATE relay_stream SET last_cursor = \(last) WHERE circle = \(circle) AND stream = 'envelopes'", logger: logger)
                try await connection.query(
                    """
                    UPDATE relay_circle SET bytes = bytes + \(Int64(change)), resync_below = GREATEST(resync_below, \(highest))
                    WHERE circle = \(circle)
                    """, logger: logger)
            }
        }
    }

    package func envelopes(circle: UUID, after cursor: UInt64, limit: Int) async throws -> (records: [RelayRecord], resyncFloor: UInt64) {
        try await failing("cannot read circle \(circle)") { [self] in
            // One round trip: the circle's row, with its records beside it (none: one row of NULLs).
            let rows = try await client.query(
                """
                SELECT c.resync_below, r.cursor, r.body FROM relay_circle c LEFT JOIN LATERAL (
                    SELECT cursor, body FROM relay_record WHERE circle = c.circle AND stream = 'envelopes' AND cursor > \(Int64(clamping: cursor))
                    ORDER BY cursor LIMIT \(Int64(limit))) r ON TRUE
                WHERE c.circle = \(circle) ORDER BY r.cursor
                """, logger: logger)
            var floor: Int64 = 0
            var records: [RelayRecord] = []
            for try await (below, at, body) in rows.decode((Int64, Int64?, ByteBuffer?).self) {
                floor = below
                if let at, let body { records.append(RelayRecord(cursor: UInt64(at), body: Array(buffer: body))) }
            }
            return (records, UInt64(floor))
        }
    }

    package func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] {
        try await failing("cannot read circle \(circle)") { [self] in
            // UUIDs compare here as PostgreSQL orders them: byte by byte, as SQLite orders them.
            let rows = try await client.query(
                """
                SELECT item, milliseconds, counter FROM relay_live_version
                WHERE circle = \(circle) AND cursor = 0 AND tombstone AND item > \(item ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
                ORDER BY item LIMIT \(Int64(limit))
                """, logger: logger)
            var deletions: [ForgottenDeletion] = []
            for try await (item, milliseconds, counter) in rows.decode((UUID, Int64, Int64).self) {
                deletions.append(
                    ForgottenDeletion(item: item, version: HybridTimestamp(milliseconds: UInt64(clamping: milliseconds), counter: UInt32(clamping: counter))))
            }
            return deletions
        }
    }

    package func liveGenerations(circle: UUID) async throws -> Set<UInt32>? {
        try await failing("cannot read circle \(circle)") { [self] in
            let unread = try await Self.first(
                Int64.self,
                client.query(
                    "SELECT 1::BIGINT FROM relay_record WHERE circle = \(circle) AND stream = 'envelopes' AND author IS NULL LIMIT 1", logger: logger))
            guard unread == nil else { return nil }
            var epochs = Set<UInt32>()
            let rows = try await client.query(
                "SELECT DISTINCT epoch FROM relay_live_version WHERE circle = \(circle) AND cursor > 0", logger: logger)
            for try await epoch in rows.decode(Int64.self) { epochs.insert(UInt32(clamping: epoch)) }
            return epochs
        }
    }

    package func remove(circle: UUID, stream: RelayStream, cursors: [UInt64]) async throws {
        try await failing("cannot remove records of circle \(circle)") { [self] in
            try await client.withTransaction(logger: logger) { connection in
                let freed = try await Self.first(
                    Int64.self,
                    connection.query(
                        """
                        WITH gone AS (
                            DELETE FROM relay_record WHERE circle = \(circle) AND stream = \(stream.rawValue)
                            AND cursor = ANY(\(cursors.map { Int64(clamping: $0) })::bigint[]) RETURNING length(body) AS bytes)
                        SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM gone
                        """, logger: logger))
                try await connection.query(
                    "UPDATE relay_circle SET bytes = bytes - \(freed ?? 0) WHERE circle = \(circle)", logger: logger)
            }
        }
    }

    package func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        try await failing("cannot read circle \(circle)") { [self] in
            let rows = try await client.query(
                """
                SELECT cursor, body FROM relay_record WHERE circle = \(circle) AND stream = \(stream.rawValue) AND cursor > \(Int64(clamping: cursor))
                ORDER BY cursor LIMIT \(Int64(limit))
                """, logger: logger)
            var records: [RelayRecord] = []
            for try await (cursor, body) in rows.decode((Int64, ByteBuffer).self) {
                records.append(RelayRecord(cursor: UInt64(cursor), body: Array(buffer: body)))
            }
            return records
        }
    }

    package func byteCount(circle: UUID) async throws -> Int {
        try await failing("cannot read circle \(circle)'s size") { [self] in
            Int(try await Self.first(Int64.self, client.query("SELECT bytes FROM relay_circle WHERE circle = \(circle)", logger: logger)) ?? 0)
        }
    }

    // MARK: Helpers

    private static func first<Value: PostgresDecodable>(_ type: Value.Type, _ rows: PostgresRowSequence) async throws -> Value? {
        for try await value in rows.decode(Value.self) { return value }
        return nil
    }

    /// Runs `work`, turning PostgreSQL's errors into a `RelayStorageError` that says what failed
    /// and why (its own errors print a generic sentence, to keep data out of logs).
    /// A call the database does not answer in this time fails (it may be down or restarting):
    /// members back off and try again, rather than wait on a relay that waits.
    package static let patience = Duration.seconds(8)

    private func failing<Result: Sendable>(_ what: String, _ work: @escaping @Sendable () async throws -> Result) async throws -> Result {
        do {
            return try await Self.withPatience(work)
        } catch {
            var cause: any Error = error
            if let transaction = error as? PostgresTransactionError {
                cause = transaction.closureError ?? transaction.beginError ?? transaction.commitError ?? transaction.rollbackError ?? error
            }
            if cause is RelayStorageConflict || cause is RelayStorageFull { throw cause }
            throw RelayStorageError("\(what): \(Self.reason(cause))")
        }
    }

    /// `work`'s outcome, or a `RelayStorageError` once `patience` has passed without one. The
    /// work is then cancelled but not waited for: a database call that ignores cancellation (the
    /// pool waiting on a server that went away) must not hold the relay's answer, nor its caller,
    /// for ever.
    package static func withPatience<Result: Sendable>(
        within patience: Duration = PostgresRelayStorage.patience, _ work: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        // The first to finish the stream decides; what comes after is dropped.
        let (outcome, decide) = AsyncThrowingStream<Result, any Error>.makeStream()
        let worker = Task {
            do {
                decide.yield(try await work())
                decide.finish()
            } catch {
                decide.finish(throwing: error)
            }
        }
        let timer = Task {
            try await Task.sleep(for: patience)
            decide.finish(throwing: RelayStorageError("no answer from the database in \(patience.components.seconds) s"))
        }
        defer {
            worker.cancel()
            timer.cancel()
        }
        for try await result in outcome { return result }
        throw CancellationError()
    }

    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as RelayStorageError:
            return error.reason
        case let error as PSQLError where error.code == .sslUnsupported:
            return "the server answered that it speaks no TLS, which sslmode=require (the default for a database on another "
                + "machine) needs; someone between the two may have answered for it. Give the server a certificate, or add "
                + "sslmode=disable to the address only on a network you trust"
        case let error as PSQLError:
            if let message = error.serverInfo?[.message] {
                return message + (error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? "")
            }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        default:
            return "\(error)"
        }
    }
}
