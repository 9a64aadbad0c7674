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
/// key, and in format 3 into its metadata's seal too, so editing any of them, or swapping keys or
/// blobs between rows, is detected.
struct RowHeader: Equatable, Sendable {
    var uuid: UUID
    var itemClass: ItemClass
    var protection: ProtectionClass
    var synchronizable: Bool
    var accessGroupHash: [UInt8]
    var primaryKeyHash: [UInt8]
    var tokens: [UInt8]

    /// What the item key's wrap binds (formats 2 and 3); format 1 bound both of the row's
    /// ciphertexts to it.
    func associatedData(format: SealedRow.Format) -> [UInt8] {
        associatedData(label: format == .classKeys ? "keyferry.row.v1" : "keyferry.row.v2")
    }

    /// What format 3's metadata binds: the columns, and the wrapped item key of the same write,
    /// so the attributes of one version never pass for another's beside its secret.
    func metadataAssociatedData(wrappedKey: Data) -> [UInt8] {
        associatedData(label: "keyferry.meta.v3", wrappedKey: wrappedKey)
    }

    private func associatedData(label: String, wrappedKey: Data? = nil) -> [UInt8] {
        var w = ByteWriter(capacity: 96 + accessGroupHash.count + primaryKeyHash.count + tokens.count + (wrappedKey?.count ?? 0))
        w.raw(label.utf8)
        w.uuid(uuid)
        w.string(itemClass.rawValue)
        w.string(protection.rawValue)
        w.uint8(synchronizable ? 1 : 0)
        w.lengthPrefixed(accessGroupHash)
        w.lengthPrefixed(primaryKeyHash)
        w.lengthPrefixed(tokens)
        if let wrappedKey { w.lengthPrefixed(wrappedKey) }
        return w.bytes
    }
}

/// An item as it travels (in an archive, an envelope): the metadata and the secret, each its own
/// ciphertext under the item's random key, which an archive wraps under its backup keys. A row
/// keeps the same key and secret ciphertext, its metadata under the class's metadata key
/// instead: moving an item re-wraps 32 bytes and seals its metadata, never opening its secret.
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
        let plain = try AEAD.openBytes(metadata, key: key, associatedData: Tier.metadata.associatedData(uuid, itemClass))
        guard let metadata = try? ItemMetadata(decoding: plain) else { throw CryptoError.authenticationFailed }
        let record = ItemRecord(
            itemClass: itemClass, uuid: uuid, accessGroup: metadata.accessGroup, protection: protection,
            synchronizable: synchronizable, accessControl: metadata.accessControl, creationDate: metadata.creationDate,
            modificationDate: metadata.modificationDate, attributes: metadata.attributes, data: nil)
        let storable = metadata.biometryBinding.isEmpty && itemClass.primaryKey.allSatisfy { metadata.attributes[$0] != nil }
        return Opened(record: record, seal: self, biometryBound: !metadata.biometryBinding.isEmpty, storableMetadata: storable ? plain : nil)
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

    /// A seal whose metadata was read: the item as calls return it (no data), and the seal to
    /// store it by (`Keychain.sealedForRestore`).
    package struct Opened: Sendable {
        package let record: ItemRecord
        package let seal: ItemSeal
        /// Bound to a biometry enrollment, which never travels: a restore writes the metadata
        /// without it; sync refuses it (access control does not sync).
        package let biometryBound: Bool
        /// The metadata as it opened, when a row may keep it as it is: bound to no enrollment,
        /// with every primary-key attribute an add writes. Else nil, and the row's metadata is
        /// encoded again from `record` (`Keychain.metadata(of:)`).
        package let storableMetadata: [UInt8]?

        /// The secret, opened.
        package func secret() throws -> Data {
            try AEAD.open(seal.secret, key: seal.key, associatedData: Tier.secret.associatedData(record.uuid, record.itemClass))
        }
    }
}

/// An item at rest, in one of three formats (the row's `format` column).
///
/// Format 3 (`twoTiers`), Apple's: the metadata sealed under the class's metadata key, which
/// stays in memory while the class is open, so a search reads attributes without a key unwrap
/// per row; the secret under a random item key wrapped under the class key, opened only for
/// the items a call returns with data. Written since store schema v9.
/// Format 2 (`itemKey`): the metadata and the secret both under the item key.
/// Format 1 (`classKeys`): the metadata under the metadata key, the secret under a per-row key
/// stored at the front of the secret column; both bound to the row's columns.
/// Formats 1 and 2 are read as long as a row of them remains, and rewritten in format 3 as
/// soon as their class key is in memory (`FormatUpgrade`).
struct SealedRow: Sendable {
    enum Format: Int64, Sendable {
        case classKeys = 1
        case itemKey = 2
        case twoTiers = 3
    }

    var header: RowHeader
    var format: Format
    /// The item key wrapped under the class key; nil for a format 1 row.
    var wrappedKey: Data?
    var metadata: Data
    /// nil for a tombstone.
    var secret: Data?

    static let wrappedKeyCount = SymmetricKey.byteCount + AEAD.overhead
    /// Random bytes one sealing consumes: three nonces and the item key.
    static let entropyPerRow = 3 * AEAD.nonceByteCount + SymmetricKey.byteCount

    /// Seals in format 3 with randomness taken from `random` (`entropyPerRow` bytes: metadata
    /// nonce, key-wrap nonce, secret nonce, item key), so test vectors can fix every byte.
    /// `secret` nil seals a tombstone.
    static func seal(header: RowHeader, metadata: ItemMetadata, secret: Data?, keys: ClassKeys, random: [UInt8]) -> SealedRow {
        precondition(random.count == entropyPerRow)
        let n = AEAD.nonceByteCount
        let itemKey = try! SymmetricKey(bytes: random[(3 * n)...])
        let wrapped = AEAD.wrap(itemKey, under: keys.classKey, nonce: Array(random[n..<(2 * n)]), associatedData: header.associatedData(format: .itemKey))
        let sealedSecret = secret.map {
            AEAD.seal(
                $0, key: itemKey, nonce: Array(random[(2 * n)..<(3 * n)]), associatedData: ItemSeal.Tier.secret.associatedData(header.uuid, header.itemClass))
        }
        var plain = metadata.encoded
        defer { SymmetricKey.wipe(&plain) }
        return SealedRow(
            header: header, format: .twoTiers, wrappedKey: wrapped,
            metadata: sealMetadata(plain, header: header, wrappedKey: wrapped, keys: keys, nonce: Array(random[0..<n])), secret: sealedSecret)
    }

    /// A row that stores `seal`'s secret as it is, its key wrapped under `keys`' class key, and
    /// `metadata` (`ItemMetadata.encoded`) under their metadata key: what a restored or
    /// replicated item becomes, without its secret being opened. `nonces`: the wrap's, then the
    /// metadata's.
    static func wrapping(_ seal: ItemSeal, metadata plain: [UInt8], header: RowHeader, keys: ClassKeys, nonces: ArraySlice<UInt8>) -> SealedRow {
        precondition(nonces.count == 2 * AEAD.nonceByteCount)
        let split = nonces.startIndex + AEAD.nonceByteCount
        let wrapped = AEAD.wrap(seal.key, under: keys.classKey, nonce: Array(nonces[..<split]), associatedData: header.associatedData(format: .itemKey))
        return SealedRow(
            header: header, format: .twoTiers, wrappedKey: wrapped,
            metadata: sealMetadata(plain, header: header, wrappedKey: wrapped, keys: keys, nonce: Array(nonces[split...])), secret: seal.secret)
    }

    /// Format 3's metadata: `AEAD(metadata key, plaintext, header.metadataAssociatedData)`.
    private static func sealMetadata(_ plain: [UInt8], header: RowHeader, wrappedKey: Data, keys: ClassKeys, nonce: [UInt8]) -> Data {
        AEAD.seal(plain, key: keys.metadataKey, nonce: nonce, associatedData: header.metadataAssociatedData(wrappedKey: wrappedKey))
    }

    /// What opens this row's ciphertexts; format 2's item key unwrapped once for both.
    func opener(_ keys: ClassKeys) throws -> Opener {
        Opener(row: self, keys: keys, itemKey: format == .itemKey ? try unwrapItemKey(keys) : nil)
    }

    fileprivate func unwrapItemKey(_ keys: ClassKeys) throws -> SymmetricKey {
        guard let wrappedKey else { throw CryptoError.authenticationFailed }
        return try AEAD.unwrap(wrappedKey, under: keys.classKey, associatedData: header.associatedData(format: .itemKey))
    }

    /// Opens a row's metadata and secret.
    struct Opener {
        let row: SealedRow
        let keys: ClassKeys
        /// Format 2's item key; format 3 unwraps its own only for the secret.
        let itemKey: SymmetricKey?

        /// `decode` reads the metadata whole (`ItemMetadata`) or leaves its attributes coded
        /// (`ItemMetadata.Fields<EncodedAttributes>`).
        func metadata<Metadata>(_ decode: ([UInt8]) throws -> Metadata) throws -> Metadata {
            var plain = try plaintextMetadata()
            defer { SymmetricKey.wipe(&plain) }
            return try decode(plain)
        }

        func metadata() throws -> ItemMetadata { try metadata(ItemMetadata.init(decoding:)) }

        private func plaintextMetadata() throws -> [UInt8] {
            let h = row.header
            switch row.format {
            case .twoTiers:
                return try AEAD.openBytes(row.metadata, key: keys.metadataKey, associatedData: h.metadataAssociatedData(wrappedKey: row.wrappedKey ?? Data()))
            case .itemKey:
                return try AEAD.openBytes(row.metadata, key: try key(), associatedData: ItemSeal.Tier.metadata.associatedData(h.uuid, h.itemClass))
            case .classKeys:
                return try AEAD.openBytes(row.metadata, key: keys.metadataKey, associatedData: h.associatedData(format: .classKeys))
            }
        }

        /// The item key: format 2's, unwrapped already; format 3's, unwrapped now.
        private func key() throws -> SymmetricKey { try itemKey ?? row.unwrapItemKey(keys) }

        func secret() throws -> Data {
            guard let secret = row.secret else { throw CryptoError.authenticationFailed }
            switch row.format {
            case .twoTiers, .itemKey:
                return try AEAD.open(secret, key: try key(), associatedData: ItemSeal.Tier.secret.associatedData(row.header.uuid, row.header.itemClass))
            case .classKeys:
                let ad = row.header.associatedData(format: .classKeys)
                guard secret.count >= SealedRow.wrappedKeyCount else { throw CryptoError.authenticationFailed }
                let rowKey = try AEAD.unwrap(secret.prefix(SealedRow.wrappedKeyCount), under: keys.classKey, associatedData: ad)
                return try AEAD.open(secret.dropFirst(SealedRow.wrappedKeyCount), key: rowKey, associatedData: ad)
            }
        }

        /// The metadata, decoded with `decode`, and the item as it travels (`ItemSeal`): its key,
        /// the metadata sealed under it (format 3's sealed from the plaintext just read, format
        /// 2's as it is) and the secret as it is; a format 1 row sealed anew. A tombstone's
        /// (`withSecret` false) has an empty secret.
        func travelling<Metadata>(
            _ decode: ([UInt8]) throws -> Metadata, entropy: any EntropySource, withSecret: Bool = true
        ) throws -> (Metadata, ItemSeal) {
            var plain = try plaintextMetadata()
            defer { SymmetricKey.wipe(&plain) }
            let metadata = try decode(plain)
            let (uuid, itemClass) = (row.header.uuid, row.header.itemClass)
            func secretAsStored() throws -> Data {
                guard withSecret else { return Data() }
                guard let secret = row.secret else { throw CryptoError.authenticationFailed }
                return secret
            }
            switch row.format {
            case .itemKey:
                return (metadata, ItemSeal(key: try key(), metadata: row.metadata, secret: try secretAsStored()))
            case .twoTiers:
                // One write travels as the same bytes every time (sync's version digest covers
                // them): the nonce is the item key's wrap's, random and new on every write, and
                // under the item key only ever used for this plaintext.
                let itemKey = try key()
                let nonce = Array((row.wrappedKey ?? Data()).prefix(AEAD.nonceByteCount))
                let sealed = AEAD.seal(plain, key: itemKey, nonce: nonce, associatedData: ItemSeal.Tier.metadata.associatedData(uuid, itemClass))
                return (metadata, ItemSeal(key: itemKey, metadata: sealed, secret: try secretAsStored()))
            case .classKeys:
                let itemKey = SymmetricKey(randomFrom: entropy)
                return (
                    metadata,
                    ItemSeal(
                        key: itemKey,
                        metadata: AEAD.seal(plain, key: itemKey, associatedData: ItemSeal.Tier.metadata.associatedData(uuid, itemClass), entropy: entropy),
                        secret: withSecret
                            ? AEAD.seal(try secret(), key: itemKey, associatedData: ItemSeal.Tier.secret.associatedData(uuid, itemClass), entropy: entropy)
                            : Data())
                )
            }
        }
    }

    /// This row in format 3. A format 2 row keeps its item key and secret and has only its
    /// metadata sealed again, under the metadata key; a format 1 row is sealed anew.
    func upgraded(_ keys: ClassKeys, random: [UInt8]) throws -> SealedRow {
        let opener = try opener(keys)
        let metadata = try opener.metadata()
        if format == .itemKey, let wrappedKey {
            var plain = metadata.encoded
            defer { SymmetricKey.wipe(&plain) }
            let nonce = Array(random[0..<AEAD.nonceByteCount])
            return SealedRow(
                header: header, format: .twoTiers, wrappedKey: wrappedKey,
                metadata: Self.sealMetadata(plain, header: header, wrappedKey: wrappedKey, keys: keys, nonce: nonce), secret: secret)
        }
        return Self.seal(header: header, metadata: metadata, secret: try secret.map { _ in try opener.secret() }, keys: keys, random: random)
    }
}

/// A class key and the metadata key it unwraps, as held in memory while available: the
/// metadata key opens the attributes of the class's items, the class key their item keys.
struct ClassKeys: Sendable {
    var classKey: SymmetricKey
    var metadataKey: SymmetricKey
}
