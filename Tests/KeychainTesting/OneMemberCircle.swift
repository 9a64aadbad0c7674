package import Foundation
import KeychainModel
package import KeyferryCrypto
package import SyncWire

/// A circle of one on a relay: its creator, its history, and the creator's signature on pushes.
package struct OneMemberCircle {
    package let creator = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    package let history: CircleHistory

    package init() { history = CircleHistory(creator: creator, name: "phone") }

    package var circle: UUID { history.circle }
    package var author: SigningKey { creator.signingKey }

    package func proof(_ bodies: [[UInt8]], _ stream: RelayStream = .envelopes, by key: SigningKey? = nil) -> PushProof {
        PushProof(signing: bodies, circle: circle, stream: stream, key: key ?? author)
    }

    /// `count` batches of one envelope each, chained, of items whose attributes and secrets
    /// carry marker strings.
    package func batches(_ count: Int, by author: SigningKey? = nil) throws -> [[UInt8]] {
        let author = author ?? self.author
        let keys = CircleKeys(circle: circle, epoch: 1)
        var link = BatchLink.start
        return try (0..<count).map { i in
            let item = SyncedItem(
                version: HybridTimestamp(milliseconds: UInt64(1_000 + i)), isTombstone: false,
                record: ItemRecord(
                    itemClass: .genericPassword, uuid: UUID(), accessGroup: "MARKER-GROUP", protection: .afterFirstUnlock,
                    synchronizable: true, accessControl: nil, creationDate: Date(), modificationDate: Date(),
                    attributes: [.account: .string("MARKER-ACCOUNT-\(i)")], data: Data("MARKER-SECRET-\(i)".utf8)))
            let batch = EnvelopeBatch([try SealedEnvelope.seal(item, keys: keys, author: author.publicKey)], circle: circle, author: author, after: link)
            link = batch.link
            return batch.bytes
        }
    }

    /// Puts the circle on the relay.
    package func create(on client: any RelayTransport) async throws {
        try await client.push(history.entries.map(\.bytes), circle: circle, stream: .membership, proof: nil)
    }
}
