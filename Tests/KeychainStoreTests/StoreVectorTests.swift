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

    static let index = ItemIndex(key: uid.derive(context: "kfindex_"))

    /// The vector item's plaintext columns, its keyed hashes under the vector UID's index key.
    static var header: RowHeader {
        let primaryKey = PrimaryKey(itemClass: .genericPassword, accessGroup: metadata.accessGroup, synchronizable: false, attributes: metadata.attributes)
        return RowHeader(
            uuid: uuid, itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false,
            accessGroupHash: index.accessGroupHash(metadata.accessGroup), primaryKeyHash: index.primaryKeyHash(primaryKey),
            tokens: index.tokens(.genericPassword, metadata.attributes))
    }

    @Test("derived keys, hashes, metadata encoding and the sealed row match the published bytes")
    func vector() throws {
        let keybag = Keybag(uid: Self.uid, entropy: SystemEntropy())
        let (index, metadata, header) = (Self.index, Self.metadata, Self.header)
        let sealed = SealedRow.seal(
            header: header, metadata: metadata, secret: Data("hunter2".utf8), classKey: Self.classKey, random: Self.bytes(0x80...0xe7))
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
            "wrappedItemKey": Self.hex(sealed.wrappedKey!),
            "sealedMetadata": Self.hex(sealed.metadata),
            "secret": Self.hex(sealed.secret!),
        ]
        for (name, value) in actual.sorted(by: { $0.key < $1.key }) {
            #expect(value == StoreVector.expected[name], "\(name) = \(value)")
        }
        // And the row opens again with the class key.
        let opener = try sealed.opener(ClassKeys(classKey: Self.classKey, metadataKey: Self.metadataKey))
        #expect(try opener.metadata() == metadata)
        #expect(try opener.secret() == Data("hunter2".utf8))
    }

    @Test("a format 1 row, as written before item keys, still opens")
    func formatOne() throws {
        // The format 1 vector Protocol/store.md published until format 2.
        let (metadata, header) = (Self.metadata, Self.header)
        let row = SealedRow(
            header: header, wrappedKey: nil, metadata: Data(Hex.decode(StoreVector.formatOne["sealedMetadata"]!)!),
            secret: Data(Hex.decode(StoreVector.formatOne["secret"]!)!))
        let keys = ClassKeys(classKey: Self.classKey, metadataKey: Self.metadataKey)
        let opener = try row.opener(keys)
        #expect(try opener.metadata() == metadata)
        #expect(try opener.secret() == Data("hunter2".utf8))
        // Exported, it travels as format 2 does: under an item key of its own.
        let seal = try opener.seal(entropy: SystemEntropy())
        let opened = try seal.opened(uuid: Self.uuid, itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false)
        #expect(opened.record.attributes == metadata.attributes && opened.record.accessGroup == metadata.accessGroup)
        #expect(try opened.secret() == Data("hunter2".utf8))
        #expect(throws: CryptoError.authenticationFailed) {
            try seal.opened(uuid: UUID(), itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false)
        }
        // Upgraded, it is format 2 and holds the same item.
        let upgraded = try row.upgraded(keys, random: SystemEntropy().bytes(SealedRow.entropyPerRow))
        #expect(upgraded.format == .itemKey && upgraded.header == header)
        #expect(try upgraded.opener(keys).metadata() == metadata)
        #expect(try upgraded.opener(keys).secret() == Data("hunter2".utf8))
    }
}
