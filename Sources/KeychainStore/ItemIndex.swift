import Foundation
import KeychainModel
import KeyferryCrypto

/// Keyed hashes that let the store find items without decrypting them: one per primary key
/// (uniqueness), one per access group (entitlement scoping) and one token per attribute value
/// (equality search). The key derives from the hardware UID, so the hashes mean nothing off
/// the device, and lookups work in every lock state (delete must succeed while locked).
struct ItemIndex: Sendable {
    let key: SymmetricKey

    static let tokenByteCount = 16

    func accessGroupHash(_ group: String) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array("agrp".utf8))
        w.string(group)
        return KeyedHash.digest(of: w.bytes, key: key, length: 16)
    }

    func primaryKeyHash(_ primaryKey: PrimaryKey) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        w.raw("pkey".utf8)
        w.primaryKey(primaryKey)
        return KeyedHash.digest(of: w.bytes, key: key, length: 32)
    }

    func token(_ itemClass: ItemClass, _ attribute: AttributeKey, _ value: AttributeValue) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.raw("attr".utf8)
        w.string(itemClass.rawValue)
        w.string(attribute.rawValue)
        w.canonical(value)
        return KeyedHash.digest(of: w.bytes, key: key, length: Self.tokenByteCount)
    }

    /// Every attribute's token, sorted and concatenated: the `tokens` column.
    func tokens(_ itemClass: ItemClass, _ attributes: Attributes) -> [UInt8] {
        var column = [UInt8]()
        column.reserveCapacity(attributes.count * Self.tokenByteCount)
        for token in attributes.map({ token(itemClass, $0.key, $0.value) }).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            column.append(contentsOf: token)
        }
        return column
    }

    /// Whether a row's tokens include every token a query asks for.
    static func tokens(_ row: [UInt8], include wanted: [[UInt8]]) -> Bool {
        let size = tokenByteCount
        return wanted.allSatisfy { token in
            stride(from: 0, to: row.count, by: size).contains { offset in
                row[offset..<offset + size].elementsEqual(token)
            }
        }
    }
}
