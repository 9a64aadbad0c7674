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
        let sealed = SealedRow.seal(header: header, metadata: metadata, secret: Data("hunter2".utf8), keys: Self.keys, random: Self.bytes(0x80...0xe7))
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
        // And the row opens again: its attributes with the metadata key alone, its secret with
        // the class key alone.
        let noClassKey = ClassKeys(classKey: SymmetricKey(randomFrom: SystemEntropy()), metadataKey: Self.metadataKey)
        #expect(try sealed.opener(noClassKey).metadata() == metadata)
        #expect(throws: CryptoError.authenticationFailed) { try sealed.opener(noClassKey).secret() }
        let noMetadataKey = ClassKeys(classKey: Self.classKey, metadataKey: SymmetricKey(randomFrom: SystemEntropy()))
        #expect(try sealed.opener(noMetadataKey).secret() == Data("hunter2".utf8))
        #expect(throws: CryptoError.authenticationFailed) { try sealed.opener(noMetadataKey).metadata() }
        // The metadata of one write does not open beside another write's key.
        var moved = sealed
        moved.wrappedKey = AEAD.wrap(
            try SymmetricKey(bytes: Self.bytes(0xc8...0xe7)), under: Self.classKey, associatedData: header.associatedData(format: .itemKey),
            entropy: SystemEntropy())
        #expect(try moved.opener(Self.keys).secret() == Data("hunter2".utf8))
        #expect(throws: CryptoError.authenticationFailed) { try moved.opener(Self.keys).metadata() }
    }

    static let keys = ClassKeys(classKey: classKey, metadataKey: metadataKey)

    @Test("a format 2 row opens, travels with its metadata as stored, and upgrades keeping its key and secret")
    func formatTwo() throws {
        let format3 = SealedRow.seal(
            header: Self.header, metadata: Self.metadata, secret: Data("hunter2".utf8), keys: Self.keys, random: Self.bytes(0x80...0xe7))
        var row = format3
        (row.format, row.metadata) = (.itemKey, Data(Hex.decode(StoreVector.formatTwoMetadata)!))
        #expect(try row.opener(Self.keys).metadata() == Self.metadata)
        #expect(try row.opener(Self.keys).secret() == Data("hunter2".utf8))
        let (_, seal) = try row.opener(Self.keys).travelling(ItemMetadata.init(decoding:), entropy: SystemEntropy())
        #expect(seal.metadata == row.metadata && seal.secret == row.secret)

        let upgraded = try row.upgraded(Self.keys, random: Self.bytes(0x80...0xe7))
        #expect(upgraded.format == .twoTiers)
        #expect(upgraded.wrappedKey == row.wrappedKey && upgraded.secret == row.secret, "the item key and secret stay as they were")
        #expect(upgraded.metadata == format3.metadata, "the metadata as format 3 seals it")
    }

    @Test("a format 3 row travels as format 2 does: its metadata sealed under its item key, its secret as stored")
    func travelling() throws {
        let row = SealedRow.seal(header: Self.header, metadata: Self.metadata, secret: Data("hunter2".utf8), keys: Self.keys, random: Self.bytes(0x80...0xe7))
        let (metadata, seal) = try row.opener(Self.keys).travelling(ItemMetadata.init(decoding:), entropy: SystemEntropy())
        #expect(metadata == Self.metadata && seal.secret == row.secret)
        #expect(Self.hex(seal.metadata) == StoreVector.travellingMetadata, "the same bytes on every export of one write")
        let opened = try seal.opened(uuid: Self.uuid, itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false)
        #expect(opened.record.attributes == Self.metadata.attributes)
        #expect(try opened.secret() == Data("hunter2".utf8))
        // Its tombstone travels without a secret.
        let (_, buried) = try row.opener(Self.keys).travelling(ItemMetadata.init(decoding:), entropy: SystemEntropy(), withSecret: false)
        #expect(buried.secret.isEmpty && buried.key.exportedBytes == Self.bytes(0xc8...0xe7))
    }

    @Test("a format 1 row, as written before item keys, still opens")
    func formatOne() throws {
        // The format 1 vector Protocol/store.md published until format 2.
        let (metadata, header) = (Self.metadata, Self.header)
        let row = SealedRow(
            header: header, format: .classKeys, wrappedKey: nil, metadata: Data(Hex.decode(StoreVector.formatOne["sealedMetadata"]!)!),
            secret: Data(Hex.decode(StoreVector.formatOne["secret"]!)!))
        let keys = ClassKeys(classKey: Self.classKey, metadataKey: Self.metadataKey)
        let opener = try row.opener(keys)
        #expect(try opener.metadata() == metadata)
        #expect(try opener.secret() == Data("hunter2".utf8))
        // Exported, it travels as the later formats do: under an item key of its own.
        let (_, seal) = try opener.travelling(ItemMetadata.init(decoding:), entropy: SystemEntropy())
        let opened = try seal.opened(uuid: Self.uuid, itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false)
        #expect(opened.record.attributes == metadata.attributes && opened.record.accessGroup == metadata.accessGroup)
        #expect(try opened.secret() == Data("hunter2".utf8))
        #expect(throws: CryptoError.authenticationFailed) {
            try seal.opened(uuid: UUID(), itemClass: .genericPassword, protection: .whenUnlocked, synchronizable: false)
        }
        // Upgraded, it is format 3 and holds the same item.
        let upgraded = try row.upgraded(keys, random: SystemEntropy().bytes(SealedRow.entropyPerRow))
        #expect(upgraded.format == .twoTiers && upgraded.header == header)
        #expect(try upgraded.opener(keys).metadata() == metadata)
        #expect(try upgraded.opener(keys).secret() == Data("hunter2".utf8))
    }
}
