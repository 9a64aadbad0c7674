package import Foundation
package import KeychainModel
package import KeyferryCrypto

/// What a row's metadata blob holds once opened: everything about an item but its secret.
struct ItemMetadata: Equatable, Sendable {
    var accessGroup: String
    var accessControl: AccessControl?
    /// The biometry enrollment a `biometryCurrentSet` item was bound to when it was added.
    var biometryBinding: [UInt8]
    var creationDate: Date
    var modificationDate: Date
    var attributes: Attributes

    static let formatVersion: UInt8 = 1

    /// Version byte, access group, dates, access control, biometry binding, then the class
    /// attributes sorted by key, each as (key, canonical value). See Protocol/store.md.
    var encoded: [UInt8] {
        var w = ByteWriter()
        w.uint8(Self.formatVersion)
        w.string(accessGroup)
        w.date(creationDate)
        w.date(modificationDate)
        w.accessControl(accessControl)
        w.lengthPrefixed(biometryBinding)
        w.attributes(attributes)
        return w.bytes
    }

    init(accessGroup: String, accessControl: AccessControl?, biometryBinding: [UInt8], creationDate: Date, modificationDate: Date, attributes: Attributes) {
        self.accessGroup = accessGroup
        self.accessControl = accessControl
        self.biometryBinding = biometryBinding
        self.creationDate = creationDate
        self.modificationDate = modificationDate
        self.attributes = attributes
    }

    /// Reads `encoded` in one pass, the attributes decoded in place.
    init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        let fields = try Fields(reading: &r) { try $0.attributes() }
        (accessGroup, creationDate, modificationDate) = (fields.accessGroup, fields.creationDate, fields.modificationDate)
        (accessControl, biometryBinding, attributes) = (fields.accessControl, fields.biometryBinding, fields.attributes)
    }

    /// The coded fields in order, the attributes read whole or left in their coding.
    struct Fields<AttributeBlock> {
        var accessGroup: String
        var creationDate: Date
        var modificationDate: Date
        var accessControl: AccessControl?
        var biometryBinding: [UInt8]
        var attributes: AttributeBlock

        /// Reads the whole of `reader`, the attributes with `readAttributes`.
        init(reading r: inout ByteReader, _ readAttributes: (inout ByteReader) throws -> AttributeBlock) throws {
            guard try r.uint8() == ItemMetadata.formatVersion else { throw ByteReader.Malformed() }
            accessGroup = try r.string()
            creationDate = try r.date()
            modificationDate = try r.date()
            accessControl = try r.accessControl()
            biometryBinding = Array(try r.lengthPrefixed())
            attributes = try readAttributes(&r)
            guard r.isAtEnd else { throw ByteReader.Malformed() }
        }
    }
}

extension ItemMetadata.Fields<EncodedAttributes> {
    /// The fields with the attributes left in their coding: what bulk reads carry on unread.
    init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        try self.init(reading: &r) { try $0.encodedAttributes() }
    }
}

/// The plaintext columns of an item row. All of them are bound into the wrap of the row's item
/// key as associated data, so editing any of them, or swapping keys or blobs between rows, is
/// detected.
struct RowHeader: Equatable, Sendable {
    var uuid: UUID
    var itemClass: ItemClass
    var protection: ProtectionClass
    var synchronizable: Bool
    var accessGroupHash: [UInt8]
    var primaryKeyHash: [UInt8]
    var tokens: [UInt8]

    /// Format 2 binds the item key's wrap; format 1 bound both of the row's ciphertexts.
    func associatedData(format: SealedRow.Format) -> [UInt8] {
        var w = ByteWriter(capacity: 96 + accessGroupHash.count + primaryKeyHash.count + tokens.count)
        w.raw(format == .itemKey ? "keyferry.row.v2".utf8 : "keyferry.row.v1".utf8)
        w.uuid(uuid)
        w.string(itemClass.rawValue)
        w.string(protection.rawValue)
        w.uint8(synchronizable ? 1 : 0)
        w.lengthPrefixed(accessGroupHash)
        w.lengthPrefixed(primaryKeyHash)
        w.lengthPrefixed(tokens)
        return w.bytes
    }
}

/// An item sealed under a random key of its own, as Apple's keychain seals it: the metadata and
/// the secret, each its own ciphertext under that key. A row keeps the key wrapped under its
/// class key; an archive under its backup keys. Moving an item re-wraps 32 bytes and carries the
/// two ciphertexts as they are.
package struct ItemSeal: Sendable {
    package let key: SymmetricKey
    /// `AEAD(key, metadata, ad = Tier.metadata.associatedData(uuid, class))`.
    package let metadata: Data
    /// `AEAD(key, secret, ad = Tier.secret.associatedData(uuid, class))`.
    package let secret: Data

    package init(key: SymmetricKey, metadata: Data, secret: Data) {
        self.key = key
        self.metadata = metadata
        self.secret = secret
    }

    /// What each ciphertext is bound to: which item it belongs to and which of its two it is.
    /// Nothing of the device: the ciphertexts go from one device to another unchanged.
    enum Tier: UInt8 {
        case metadata = 1
        case secret = 2

        /// `"keyferry.item.v2" ‖ uuid ‖ str(class) ‖ u8 tier`
        func associatedData(_ uuid: UUID, _ itemClass: ItemClass) -> [UInt8] {
            var w = ByteWriter(capacity: 48)
            w.raw("keyferry.item.v2".utf8)
            w.uuid(uuid)
            w.string(itemClass.rawValue)
            w.uint8(rawValue)
            return w.bytes
        }
    }

    /// The item the seal holds, its secret left sealed. Fails with
    /// `CryptoError.authenticationFailed` unless the seal is this item's (`uuid`, `itemClass`).
    package func opened(uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool) throws -> Opened {
        var plain = [UInt8](try AEAD.open(metadata, key: key, associatedData: Tier.metadata.associatedData(uuid, itemClass)))
        defer { SymmetricKey.wipe(&plain) }
        guard let metadata = try? ItemMetadata(decoding: plain) else { throw CryptoError.authenticationFailed }
        let record = ItemRecord(
            itemClass: itemClass, uuid: uuid, accessGroup: metadata.accessGroup, protection: protection,
            synchronizable: synchronizable, accessControl: metadata.accessControl, creationDate: metadata.creationDate,
            modificationDate: metadata.modificationDate, attributes: metadata.attributes, data: nil)
        return Opened(record: record, seal: self, biometryBound: !metadata.biometryBinding.isEmpty)
    }

    /// `record` sealed under a fresh key as a row of this keychain seals it: its metadata (no
    /// biometry binding) and `record.data`, or no secret for a tombstone. What a member's
    /// keychain holds of an item it sends, for tests of what members send.
    package static func sealing(_ record: ItemRecord, isTombstone: Bool = false, entropy: any EntropySource = SystemEntropy()) -> ItemSeal {
        let key = SymmetricKey(randomFrom: entropy)
        var plain = ItemMetadata(
            accessGroup: record.accessGroup, accessControl: record.accessControl, biometryBinding: [], creationDate: record.creationDate,
            modificationDate: record.modificationDate, attributes: record.attributes
        ).encoded
        defer { SymmetricKey.wipe(&plain) }
        let (uuid, itemClass) = (record.uuid, record.itemClass)
        return ItemSeal(
            key: key, metadata: AEAD.seal(plain, key: key, associatedData: Tier.metadata.associatedData(uuid, itemClass), entropy: entropy),
            secret: isTombstone
                ? Data() : AEAD.seal(record.data ?? Data(), key: key, associatedData: Tier.secret.associatedData(uuid, itemClass), entropy: entropy))
    }

    /// The secret, for the one arrival that cannot keep the seal as it is.
    func secret(of record: ItemRecord) throws -> Data {
        try AEAD.open(secret, key: key, associatedData: Tier.secret.associatedData(record.uuid, record.itemClass))
    }

    /// A seal whose metadata was read: the item as calls return it (no data), and the seal to
    /// store it by (`Keychain.sealedForRestore`).
    package struct Opened: Sendable {
        package var record: ItemRecord
        let seal: ItemSeal
        /// Bound to a biometry enrollment: the metadata is sealed again without the binding on
        /// arrival, since enrollments never travel.
        package let biometryBound: Bool

        /// The secret, opened.
        package func secret() throws -> Data { try seal.secret(of: record) }
    }
}

/// An item at rest.
///
/// Format 2 (`itemKey`): the metadata and the secret are sealed under a random item key, which
/// is wrapped under the class key with the row's columns as associated data.
/// Format 1 (`classKeys`, rows written before it): the metadata under the class's metadata key,
/// the secret under a per-row key stored at the front of the secret column; both bound to the
/// row's columns. Read as long as a row of it remains; rewritten in format 2 as soon as its
/// class key is in memory (`FormatUpgrade`).
struct SealedRow: Sendable {
    enum Format: Sendable { case classKeys, itemKey }

    var header: RowHeader
    /// The item key wrapped under the class key; nil for a format 1 row.
    var wrappedKey: Data?
    var metadata: Data
    /// nil for a tombstone.
    var secret: Data?

    var format: Format { wrappedKey == nil ? .classKeys : .itemKey }

    static let wrappedKeyCount = SymmetricKey.byteCount + AEAD.overhead
    /// Random bytes one sealing consumes: three nonces and the item key.
    static let entropyPerRow = 3 * AEAD.nonceByteCount + SymmetricKey.byteCount

    /// Seals in format 2 with randomness taken from `random` (`entropyPerRow` bytes: metadata
    /// nonce, key-wrap nonce, secret nonce, item key), so test vectors can fix every byte.
    /// `secret` nil seals a tombstone.
    static func seal(header: RowHeader, metadata: ItemMetadata, secret: Data?, classKey: SymmetricKey, random: [UInt8]) -> SealedRow {
        precondition(random.count == entropyPerRow)
        let n = AEAD.nonceByteCount
        let itemKey = try! SymmetricKey(bytes: random[(3 * n)...])
        var plain = metadata.encoded
        defer { SymmetricKey.wipe(&plain) }
        let sealedMetadata = AEAD.seal(
            plain, key: itemKey, nonce: Array(random[0..<n]), associatedData: ItemSeal.Tier.metadata.associatedData(header.uuid, header.itemClass))
        let sealedSecret = secret.map {
            AEAD.seal(
                $0, key: itemKey, nonce: Array(random[(2 * n)..<(3 * n)]), associatedData: ItemSeal.Tier.secret.associatedData(header.uuid, header.itemClass))
        }
        let wrapped = AEAD.wrap(itemKey, under: classKey, nonce: Array(random[n..<(2 * n)]), associatedData: header.associatedData(format: .itemKey))
        return SealedRow(header: header, wrappedKey: wrapped, metadata: sealedMetadata, secret: sealedSecret)
    }

    /// A row that stores `seal` as it is, its key wrapped under `classKey`: what a restored
    /// item becomes, without its secret being opened.
    static func wrapping(_ seal: ItemSeal, header: RowHeader, classKey: SymmetricKey, nonce: [UInt8]) -> SealedRow {
        let wrapped = AEAD.wrap(seal.key, under: classKey, nonce: nonce, associatedData: header.associatedData(format: .itemKey))
        return SealedRow(header: header, wrappedKey: wrapped, metadata: seal.metadata, secret: seal.secret)
    }

    /// The keys that open this row's ciphertexts, unwrapped once for both.
    func opener(_ keys: ClassKeys) throws -> Opener {
        guard let wrappedKey else {
            return Opener(row: self, key: .classKeys(keys, header.associatedData(format: .classKeys)))
        }
        return Opener(row: self, key: .item(try AEAD.unwrap(wrappedKey, under: keys.classKey, associatedData: header.associatedData(format: .itemKey))))
    }

    /// Opens a row's metadata and secret.
    struct Opener {
        enum Key {
            case item(SymmetricKey)
            /// Format 1: the class's keys, and the row's associated data.
            case classKeys(ClassKeys, [UInt8])
        }

        let row: SealedRow
        let key: Key

        /// `decode` reads the metadata whole (`ItemMetadata`) or leaves its attributes coded
        /// (`ItemMetadata.Fields<EncodedAttributes>`).
        func metadata<Metadata>(_ decode: ([UInt8]) throws -> Metadata) throws -> Metadata {
            var plain: [UInt8]
            switch key {
            case .item(let itemKey):
                plain = [UInt8](
                    try AEAD.open(row.metadata, key: itemKey, associatedData: ItemSeal.Tier.metadata.associatedData(row.header.uuid, row.header.itemClass)))
            case .classKeys(let keys, let ad):
                plain = [UInt8](try AEAD.open(row.metadata, key: keys.metadataKey, associatedData: ad))
            }
            defer { SymmetricKey.wipe(&plain) }
            return try decode(plain)
        }

        func metadata() throws -> ItemMetadata { try metadata(ItemMetadata.init(decoding:)) }

        func secret() throws -> Data {
            guard let secret = row.secret else { throw CryptoError.authenticationFailed }
            switch key {
            case .item(let itemKey):
                return try AEAD.open(secret, key: itemKey, associatedData: ItemSeal.Tier.secret.associatedData(row.header.uuid, row.header.itemClass))
            case .classKeys(let keys, let ad):
                guard secret.count >= SealedRow.wrappedKeyCount else { throw CryptoError.authenticationFailed }
                let rowKey = try AEAD.unwrap(secret.prefix(SealedRow.wrappedKeyCount), under: keys.classKey, associatedData: ad)
                return try AEAD.open(secret.dropFirst(SealedRow.wrappedKeyCount), key: rowKey, associatedData: ad)
            }
        }

        /// The item as it travels: its key and both ciphertexts, a format 1 row sealed anew. A
        /// tombstone's (`withSecret` false) has an empty secret.
        func seal(entropy: any EntropySource, withSecret: Bool = true) throws -> ItemSeal {
            switch key {
            case .item(let itemKey):
                guard withSecret else { return ItemSeal(key: itemKey, metadata: row.metadata, secret: Data()) }
                guard let secret = row.secret else { throw CryptoError.authenticationFailed }
                return ItemSeal(key: itemKey, metadata: row.metadata, secret: secret)
            case .classKeys:
                let itemKey = SymmetricKey(randomFrom: entropy)
                let (uuid, itemClass) = (row.header.uuid, row.header.itemClass)
                var plain = try metadata { $0 }
                defer { SymmetricKey.wipe(&plain) }
                return ItemSeal(
                    key: itemKey,
                    metadata: AEAD.seal(plain, key: itemKey, associatedData: ItemSeal.Tier.metadata.associatedData(uuid, itemClass), entropy: entropy),
                    secret: withSecret
                        ? AEAD.seal(try secret(), key: itemKey, associatedData: ItemSeal.Tier.secret.associatedData(uuid, itemClass), entropy: entropy)
                        : Data())
            }
        }
    }

    /// This row in format 2, its ciphertexts opened and sealed again under a new item key.
    func upgraded(_ keys: ClassKeys, random: [UInt8]) throws -> SealedRow {
        let opener = try opener(keys)
        return Self.seal(
            header: header, metadata: try opener.metadata(), secret: try secret.map { _ in try opener.secret() }, classKey: keys.classKey, random: random)
    }
}

/// A class key and the metadata key it unwraps, as held in memory while available. The
/// metadata key opens format 1 rows only.
struct ClassKeys: Sendable {
    var classKey: SymmetricKey
    var metadataKey: SymmetricKey
}
