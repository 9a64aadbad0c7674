import Foundation
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
        let result: T
        do {
            result = try body(load)
        } catch {
            try? device.database.write { try $0.execute(sql: KeychainDatabase.uniqueItemIndexes) }
            throw error
        }
        try device.database.write { try $0.execute(sql: KeychainDatabase.uniqueItemIndexes) }
        return result
    }
}

/// Who holds each UUID and primary key of the item table while its unique indexes are set
/// aside (`Keychain.loadingInBulk`): what the indexes would have found, in memory.
package final class BulkLoad {
    private var byUUID: [UUID: Int64] = [:]
    private var byPrimaryKey: [RowKey: Int64] = [:]

    /// A primary key's 32-byte hash held inline, with no allocation per row; a row edited to
    /// another length keeps its bytes.
    private enum RowKey: Hashable {
        case digest(UInt64, UInt64, UInt64, UInt64)
        case other([UInt8])

        init(_ bytes: some Collection<UInt8>) {
            guard bytes.count == 32 else {
                self = .other(Array(bytes))
                return
            }
            let words = Array(bytes).withUnsafeBytes { raw in (0..<4).map { raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) } }
            self = .digest(words[0], words[1], words[2], words[3])
        }
    }

    private var loaded = false

    fileprivate init(_ database: KeychainDatabase) throws {
        try database.write { try $0.execute(sql: KeychainDatabase.dropUniqueItemIndexes) }
    }

    /// Reads who holds what, once, in the first write of the load: after whatever the caller
    /// removed before it (a restore's local items).
    func readHolders(_ db: Database) throws {
        guard !loaded else { return }
        let rows = try Row.fetchCursor(db, sql: "SELECT id, uuid, pk_hash FROM item")
        while let row = try rows.next() {
            guard let uuid = UUID(storedBytes: row[1] as Data) else {
                throw KeychainError(.decode, "an item row has an unreadable UUID; the database was edited.")
            }
            record(uuid: uuid, primaryKeyHash: row[2] as Data, id: row[0])
        }
        loaded = true
    }

    /// The rows a new item with this UUID and primary key replaces.
    func holders(uuid: UUID, primaryKeyHash: [UInt8]) -> Set<Int64> {
        Set([byUUID[uuid], byPrimaryKey[RowKey(primaryKeyHash)]].compactMap { $0 })
    }

    func record(uuid: UUID, primaryKeyHash: some Collection<UInt8>, id: Int64) {
        byUUID[uuid] = id
        byPrimaryKey[RowKey(primaryKeyHash)] = id
    }

    func forget(uuid: UUID, primaryKeyHash: some Collection<UInt8>) {
        byUUID[uuid] = nil
        byPrimaryKey[RowKey(primaryKeyHash)] = nil
    }
}
