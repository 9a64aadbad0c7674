import Foundation
import KeychainModel
import KeychainStore
package import KeyferryCrypto
package import SyncWire

extension SealedEnvelope {
    /// `item` as a member's keychain sends it (format 2): sealed under a fresh item key as its
    /// row would be, that key re-wrapped for the circle. Any item, however wrong: what tests of
    /// what members send need.
    package static func seal(_ item: SyncedItem, keys: CircleKeys, author: SigningPublicKey, entropy: any EntropySource = SystemEntropy()) throws
        -> SealedEnvelope
    {
        let seal = ItemSeal.sealing(item.record, isTombstone: item.isTombstone, entropy: entropy)
        return try SealedEnvelope.seal(
            KeyedItem(
                uuid: item.record.uuid, itemClass: item.record.itemClass, protection: item.record.protection, version: item.version,
                isTombstone: item.isTombstone, key: seal.key, metadata: seal.metadata, secret: seal.secret),
            keys: keys, author: author, random: entropy.bytes(SealedEnvelope.entropyPerEnvelope))
    }
}

extension SealedEnvelope.Contents {
    /// The whole item, its secret opened, as a receiver's keychain reads it back.
    package func openedItem() throws -> SyncedItem {
        switch self {
        case .whole(let item): return item
        case .keyed(let keyed):
            let opened = try ItemSeal(key: keyed.key, metadata: keyed.metadata, secret: keyed.secret)
                .opened(uuid: keyed.uuid, itemClass: keyed.itemClass, protection: keyed.protection, synchronizable: true)
            var record = opened.record
            record.data = keyed.isTombstone ? nil : try opened.secret()
            return SyncedItem(version: keyed.version, isTombstone: keyed.isTombstone, record: record)
        }
    }
}
