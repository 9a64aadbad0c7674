import ArgumentParser
import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// The keychain engine against plain SQLite single-row transactions, measured in one run on the
/// same disk so the ratios hold however noisy the machine is.
struct StoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Add, copy, update, delete and bulk import N generic passwords (run with -c release).",
        discussion: """
            Targets, each against its floor in the same run: add at least 0.7x a single-row transaction \
            of the keychain's row shape; copy by primary key (with data) at least 0.5x a GRDB lookup by \
            key; bulk import at least 0.7x a batch insert of the keychain's row shape.
            """)

    @Option(help: "Generic passwords per phase.") var items = 10_000
    @Option(help: "Items in the bulk import phase.") var bulkItems = 100_000
    @Option(help: "Directory for the scratch databases (default: a temporary directory).") var dir: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard items > 0, bulkItems > 0 else { throw ValidationError("--items and --bulk-items must be positive.") }
    }

    func run() throws {
        let root = URL(fileURLWithPath: dir ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("keyferry-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let secret = Data((0..<256).map { UInt8($0 % 251) })
        var results = [Measurement]()
        func progress(_ text: String) { if !json { FileHandle.standardError.write(Data("  \(text)...\n".utf8)) } }

        progress("plain SQLite baselines")
        let plain = try PlainSQLite(at: root.appendingPathComponent("plain.db"))
        let baseline = try measure("sqlite single-row transactions", items) { try plain.insertEach(items, value: secret) }
        results.append(baseline)
        let batchBaseline = try measure("sqlite batch insert (one transaction)", bulkItems) { try plain.insertBatch(bulkItems, value: secret) }
        results.append(batchBaseline)
        // Floors: what GRDB and SQLite alone cost for the keychain's shapes, with no crypto at all.
        results.append(try measure("floor: sqlite lookup by key", items) { try plain.lookupEach(items) })
        let shaped = try PlainSQLite(at: root.appendingPathComponent("shaped.db"), keychainShape: true)
        let shapedRows = ShapedRows(count: bulkItems)
        results.append(try measure("floor: batch insert, keychain row shape", bulkItems) { try shaped.insertShaped(shapedRows) })
        let singleShaped = try PlainSQLite(at: root.appendingPathComponent("shaped-each.db"), keychainShape: true)
        let singleRows = ShapedRows(count: items)
        results.append(try measure("floor: single-row tx, keychain row shape", items) { try singleShaped.insertShapedEach(singleRows) })

        let device = try Device.create(
            at: root.appendingPathComponent("device"),
            options: DeviceOptions(name: "Bench iPhone", passcode: "123456", passcodeHashing: .minimum))
        try device.install(AppManifest(bundleID: "com.example.bench", teamID: "BENCH12345"))
        let keychain = try device.keychain(for: "com.example.bench")
        func item(_ n: Int, service: String = "bench") -> NewItem {
            NewItem(.genericPassword, attributes: [.account: .string("account-\(n)"), .service: .string(service)], data: secret)
        }
        func query(_ n: Int, _ returning: ReturnOptions) -> ItemQuery {
            ItemQuery(.genericPassword, attributes: [.account: .string("account-\(n)"), .service: .string("bench")], returning: returning)
        }

        progress("add")
        results.append(try measure("add (one transaction each)", items) { for n in 0..<items { try keychain.add(item(n)) } })
        progress("copy")
        results.append(try measure("copy by primary key, data", items) { for n in 0..<items { _ = try keychain.copy(query(n, .data)) } })
        results.append(try measure("copy by primary key, attributes", items) { for n in 0..<items { _ = try keychain.copy(query(n, .attributes)) } })
        progress("update")
        results.append(
            try measure("update data", items) {
                for n in 0..<items { try keychain.update(query(n, []), with: ItemChanges(data: Data(secret.reversed()))) }
            })
        progress("delete")
        results.append(try measure("delete", items) { for n in 0..<items { try keychain.delete(query(n, [])) } })
        progress("bulk import")
        let bulk = (0..<bulkItems).map { item($0, service: "bulk") }
        results.append(try measure("bulk import (one transaction)", bulkItems) { try keychain.importItems(bulk) })

        let report = BenchReport(
            items: items, bulkItems: bulkItems, baselinePerSecond: baseline.perSecond,
            batchPerSecond: batchBaseline.perSecond, results: results)
        if json {
            try printJSON(encodable: report)
        } else {
            print(report.table)
        }
    }

    private func measure(_ name: String, _ count: Int, _ body: () throws -> Void) throws -> Measurement {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Measurement(name: name, operations: count, seconds: seconds)
    }
}

struct Measurement: Encodable {
    var name: String
    var operations: Int
    var seconds: Double
    var perSecond: Double { Double(operations) / seconds }

    enum CodingKeys: String, CodingKey { case name, operations, seconds, perSecond }
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(operations, forKey: .operations)
        try c.encode(seconds, forKey: .seconds)
        try c.encode(perSecond.rounded(), forKey: .perSecond)
    }
}

struct BenchReport: Encodable {
    var items: Int
    var bulkItems: Int
    var baselinePerSecond: Double
    var batchPerSecond: Double
    var results: [Measurement]
    /// Each target's operation over its floor, in this run.
    var targets: [Target] = []

    struct Target: Encodable {
        var operation: String
        var floor: String
        var ratio: Double
        var minimum: Double
    }

    /// The issue's targets: an operation, the floor it is judged against, the least ratio.
    private static let goals = [
        ("add (one transaction each)", "floor: single-row tx, keychain row shape", 0.7),
        ("copy by primary key, data", "floor: sqlite lookup by key", 0.5),
        ("bulk import (one transaction)", "floor: batch insert, keychain row shape", 0.7),
    ]

    init(items: Int, bulkItems: Int, baselinePerSecond: Double, batchPerSecond: Double, results: [Measurement]) {
        (self.items, self.bulkItems, self.baselinePerSecond, self.batchPerSecond, self.results) = (items, bulkItems, baselinePerSecond, batchPerSecond, results)
        let rates = Dictionary(results.map { ($0.name, $0.perSecond) }) { first, _ in first }
        targets = Self.goals.compactMap { operation, floor, minimum in
            guard let rate = rates[operation], let floorRate = rates[floor] else { return nil }
            return Target(operation: operation, floor: floor, ratio: rate / floorRate, minimum: minimum)
        }
    }

    var table: String {
        var lines = ["operation                                  ops/s   x SQLite single-row tx   x SQLite batch"]
        for r in results {
            let rate = String(Int(r.perSecond.rounded())).leftPadded(to: 9)
            let ratio = String(format: "%.2f", r.perSecond / baselinePerSecond).leftPadded(to: 8)
            let batchRatio = String(format: "%.2f", r.perSecond / batchPerSecond).leftPadded(to: 25)
            lines.append(r.name.padded(38) + rate + ratio + batchRatio)
        }
        lines.append("")
        for target in targets {
            let verdict = target.ratio >= target.minimum ? "met" : "not met"
            lines.append(
                "\(target.operation) against \(target.floor.dropFirst("floor: ".count)): "
                    + String(format: "%.2fx (target >= %.1fx, ", target.ratio, target.minimum) + verdict + ")")
        }
        return lines.joined(separator: "\n")
    }
}

/// The baselines: a plain table (text key, 256-byte value) with the keychain's pragmas, one row
/// per transaction and many rows in one.
struct PlainSQLite {
    let queue: DatabaseQueue

    /// `keychainShape`: instead of the plain table, one shaped like the keychain's `item` rows
    /// (two unique 32-byte keyed-hash columns at random positions, a sequence index, ~600 bytes).
    init(at url: URL, keychainShape: Bool = false) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        queue = try DatabaseQueue(path: url.path, configuration: configuration)
        try queue.write { db in
            if keychainShape {
                try db.execute(
                    sql: """
                        CREATE TABLE row (id INTEGER PRIMARY KEY, uuid BLOB NOT NULL UNIQUE, pk BLOB NOT NULL UNIQUE,
                                          attributes BLOB NOT NULL, secret BLOB NOT NULL, seq INTEGER NOT NULL);
                        CREATE INDEX row_by_seq ON row (seq);
                        """)
            } else {
                try db.execute(sql: "CREATE TABLE row (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, v BLOB NOT NULL)")
            }
        }
    }

    /// Like the keychain's own transactions: BEGIN and COMMIT compiled once.
    private func transaction(_ body: (Database) throws -> Void) throws {
        try queue.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            try body(db)
            try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
        }
    }

    func insertEach(_ count: Int, value: Data) throws {
        for n in 0..<count {
            try transaction { db in
                try db.cachedStatement(sql: "INSERT INTO row (k, v) VALUES (?, ?)").execute(arguments: ["account-\(n)", value])
            }
        }
    }

    /// Reads back every row `insertEach` wrote, one lookup each, through GRDB's row API.
    func lookupEach(_ count: Int) throws {
        try queue.unsafeRead { db in
            let select = try db.cachedStatement(sql: "SELECT k, v FROM row WHERE k = ?")
            for n in 0..<count {
                guard let row = try Row.fetchOne(select, arguments: ["account-\(n)"]), (row[1] as Data).count > 0 else {
                    throw ValidationError("row account-\(n) is missing from the baseline table")
                }
            }
        }
    }

    /// All rows of the keychain's shape in one transaction: the floor of bulk import.
    func insertShaped(_ rows: ShapedRows, _ range: Range<Int>? = nil) throws {
        try transaction { db in
            for n in range ?? rows.keys.indices { try insertShapedRow(n, of: rows, db) }
        }
    }

    /// One transaction per row of the keychain's shape: the floor of `add`.
    func insertShapedEach(_ rows: ShapedRows) throws {
        for n in rows.keys.indices {
            try transaction { db in try insertShapedRow(n, of: rows, db) }
        }
    }

    private func insertShapedRow(_ n: Int, of rows: ShapedRows, _ db: Database) throws {
        try db.cachedStatement(sql: "INSERT INTO row (uuid, pk, attributes, secret, seq) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [rows.keys[n].uuid, rows.keys[n].pk, rows.attributes, rows.secret, n])
    }

    func insertBatch(_ count: Int, value: Data) throws {
        try transaction { db in
            let insert = try db.cachedStatement(sql: "INSERT INTO row (k, v) VALUES (?, ?)")
            for n in 0..<count { try insert.execute(arguments: ["batch-\(n)", value]) }
        }
    }
}

/// Random keys and blobs for the row-shape floor, made before the clock starts.
struct ShapedRows {
    var keys: [(uuid: Data, pk: Data)]
    var attributes: Data
    var secret: Data

    init(count: Int) {
        var random = SystemRandomNumberGenerator()
        func bytes(_ n: Int) -> Data {
            Data((0..<(n + 7) / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }.prefix(n))
        }
        keys = (0..<count).map { _ in (bytes(16), bytes(32)) }
        attributes = bytes(200)
        secret = bytes(370)
    }
}
