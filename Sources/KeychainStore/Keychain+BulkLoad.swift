package import Foundation
import GRDB
import KeychainModel

extension Keychain {
    /// Runs a restore's writes with the item table's unique indexes set aside, and builds them
    /// again when `body` returns or throws. SQLite builds an index from sorted keys far faster
    /// than it inserts a row's two random keys one row at a time; meanwhile `BulkLoad` keeps
    /// every UUID and primary key unique itself. For a store being rebuilt (a restore's copy, a
    /// scratch device): a process killed inside leaves the indexes out until the device's next
    /// power-on builds them (`KeychainDatabase`). Device scope only.
    package func loadingInBulk<T>(_ body: (BulkLoad) throws -> T) throws -> T {
        try requireDeviceScope()
        let load = try BulkLoad(device.database)
        let outcome = Result { try body(load) }
        let rebuilt = Result { try device.database.write { try $0.execute(sql: KeychainDatabase.uniqueItemIndexes) } }
        // The body's own failure is the one to report; the indexes' comes second.
        let result = try outcome.get()
        try rebuilt.get()
        return result
    }
}

/// Who holds each UUID and primary key of the item table while its unique indexes are set
/// aside (`Keychain.loadingInBulk`): what the indexes would have found, in memory. Keys are
/// held as 64-bit fingerprints under the process's random hash seed (16 bytes an entry, not
/// 48), so a fingerprint names candidates, which the caller checks against the row itself.
package final class BulkLoad {
    private var byUUID = Fingerprints()
    private var byPrimaryKey = Fingerprints()
    /// The change sequence before the load: a row with a later one is the load's own.
    let startSequence: Int64
    /// The UUIDs of rows this load wrote that a later row of the same load took the place of
    /// (its UUID or primary key), in the order they went: a backup that holds one item twice.
    package private(set) var displaced: [UUID] = []

    /// Sets the indexes aside and reads who holds what, in one transaction.
    fileprivate init(_ database: KeychainDatabase) throws {
        startSequence = database.latestChangeSequence
        try database.write { db in
            try db.execute(sql: KeychainDatabase.dropUniqueItemIndexes)
            let rows = try Row.fetchCursor(db, sql: "SELECT id, uuid, pk_hash FROM item")
            while let row = try rows.next() {
                record(uuid: try ItemTable.storedUUID(row[1]), primaryKeyHash: row[2] as Data, id: row[0])
            }
        }
    }

    /// The rows that may hold this UUID or primary key: every one that does, and rarely one
    /// whose fingerprint merely matches.
    func candidates(uuid: UUID, primaryKeyHash: some ContiguousBytes) -> Set<Int64> {
        Set(byUUID.ids(uuid.hashValue) + byPrimaryKey.ids(Self.fingerprint(primaryKeyHash)))
    }

    func record(uuid: UUID, primaryKeyHash: some ContiguousBytes, id: Int64) {
        byUUID.insert(uuid.hashValue, id)
        byPrimaryKey.insert(Self.fingerprint(primaryKeyHash), id)
    }

    func forget(uuid: UUID, primaryKeyHash: some ContiguousBytes, id: Int64) {
        byUUID.remove(uuid.hashValue, id)
        byPrimaryKey.remove(Self.fingerprint(primaryKeyHash), id)
    }

    /// A row gave way to a later one of the load: noted when the load wrote it.
    func gaveWay(uuid: UUID, changeSequence: Int64) {
        if changeSequence > startSequence { displaced.append(uuid) }
    }

    /// Hashed whole, not byte by byte: each restored row takes two.
    private static func fingerprint(_ bytes: some ContiguousBytes) -> Int {
        var hasher = Hasher()
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize()
    }

    /// Row ids by fingerprint; the few fingerprints two live rows share keep the second aside.
    struct Fingerprints {
        private var first: [Int: Int64] = [:]
        private var shared: [Int: [Int64]] = [:]

        func ids(_ fingerprint: Int) -> [Int64] {
            guard let id = first[fingerprint] else { return [] }
            return [id] + (shared[fingerprint] ?? [])
        }

        mutating func insert(_ fingerprint: Int, _ id: Int64) {
            if first[fingerprint] == nil { first[fingerprint] = id } else { shared[fingerprint, default: []].append(id) }
        }

        mutating func remove(_ fingerprint: Int, _ id: Int64) {
            if first[fingerprint] == id {
                first[fingerprint] = shared[fingerprint]?.popLast()
            } else {
                shared[fingerprint]?.removeAll { $0 == id }
            }
            if shared[fingerprint]?.isEmpty == true { shared[fingerprint] = nil }
        }
    }
}
