import Foundation
import GRDB
import KeychainModel
import KeyferryCrypto

/// Rewrites the rows of formats 1 and 2 in format 3 (the metadata under the class's metadata
/// key, the secret under an item key wrapped by the class key), class by class, as their keys
/// come into memory: at power-on the classes that open then, at unlock the rest. One
/// transaction per call, so a crash leaves every row in one format or the other, and each
/// readable. The row keeps its place, its UUID and its change sequence: it is the same item.
enum FormatUpgrade {
    /// Upgrades every row of an earlier format that `keys` open; returns how many. Finding none is an
    /// indexed lookup that returns at once.
    @discardableResult
    static func run(_ database: KeychainDatabase, keys: [ProtectionClass: ClassKeys], entropy: any EntropySource) throws -> Int {
        let protections = Array(keys.keys)
        guard !protections.isEmpty else { return 0 }
        return try database.write { db in
            let rows = try ItemTable.earlierFormatRows(db, protections: protections)
            for row in rows {
                guard let classKeys = keys[row.header.protection] else { continue }
                // A row that does not open stays as it is, to fail when read, as it would have.
                guard let upgraded = try? row.sealed.upgraded(classKeys, random: entropy.bytes(SealedRow.entropyPerRow)) else { continue }
                try ItemTable.upgrade(db, id: row.id, to: upgraded)
            }
            return rows.count
        }
    }
}
