import Foundation
import KeychainModel
import KeyferryCrypto
import Testing

@testable import KeychainStore

/// The test vector of Protocol/store.md: fixed keys and inputs give fixed bytes. A change here
/// is a change of the on-disk format and needs a new format version.
@Suite("Store format vector")
struct StoreVectorTests {
    static func bytes(_ range: ClosedRange<UInt8>) -> [UInt8] { Array(range) }
    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static let uid = try! SymmetricKey(bytes: bytes(0x00...0x1f))
    static let classKey = try! SymmetricKey(bytes: bytes(0x40...0x5f))
    static let metadataKey = try! SymmetricKey(bytes: bytes(0x60...0x7f))
    static let uuid = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!
    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    static var metadata: ItemMetadata {
        ItemMetadata(
            accessGroup: "ABCDE12345.com.example.app", accessControl: nil, biometryBinding: [],
            creationDate: date, modificationDate: date,
            attributes: [.account: .string("alice"), .service: .string("mail")])
    }

    @Test("derived keys, hashes, metadata encoding and the sealed row match the published bytes")
    func vector() throws {
        let keybag = Keybag(uid: Self.uid, entropy: SystemEntropy())
        let index = ItemIndex(key: Self.uid.derive(context: "kfindex_"))
        let metadata = Self.metadata
        let primaryKey = PrimaryKey(itemClass: .genericPassword, accessGroup: metadata.accessGroup, synchronizable: false, attributes: metadata.attributes)
        let header = RowHeader(
            uuid: Self.uuid, itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false,
            accessGroupHash: index.accessGroupHash(metadata.accessGroup), primaryKeyHash: index.primaryKeyHash(primaryKey),
            tokens: index.tokens(.genericPassword, metadata.attributes))
        let sealed = SealedRow.seal(
            header: header, metadata: metadata, secret: Data("hunter2".utf8),
            keys: ClassKeys(classKey: Self.classKey, metadataKey: Self.metadataKey),
            random: Self.bytes(0x80...0xe7))
        let wrappedClassKey = AEAD.seal(
            Self.classKey.exportedBytes, key: keybag.uidWrappingKey, nonce: Self.bytes(0xa0...0xb7),
            associatedData: Keybag.classKeyAD(.whenUnlocked))
        let actual: [String: String] = [
            "uidWrappingKey": Self.hex(keybag.uidWrappingKey.exportedBytes),
            "passcodeTangleKey": Self.hex(keybag.passcodeTangleKey.exportedBytes),
            "indexKey": Self.hex(index.key.exportedBytes),
            "wrappedClassKey": Self.hex(wrappedClassKey),
            "accessGroupHash": Self.hex(header.accessGroupHash),
            "primaryKeyHash": Self.hex(header.primaryKeyHash),
            "tokens": Self.hex(header.tokens),
            "metadataPlaintext": Self.hex(metadata.encoded),
            "sealedMetadata": Self.hex(sealed.metadata),
            "secret": Self.hex(sealed.secret!),
        ]
        for (name, value) in actual.sorted(by: { $0.key < $1.key }) {
            #expect(value == StoreVector.expected[name], "\(name) = \(value)")
        }
        // And the row opens again with the same keys.
        #expect(try sealed.openMetadata(with: Self.metadataKey) == metadata)
        #expect(try sealed.openSecret(with: Self.classKey) == Data("hunter2".utf8))
    }
}
