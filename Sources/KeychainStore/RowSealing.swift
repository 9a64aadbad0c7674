import Foundation
import KeychainModel
import KeyferryCrypto

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

/// The plaintext columns of an item row. All of them are bound into the row's AEAD as
/// associated data, so editing any of them, or swapping blobs between rows, is detected.
struct RowHeader: Equatable, Sendable {
    var uuid: UUID
    var itemClass: ItemClass
    var protection: ProtectionClass
    var synchronizable: Bool
    var accessGroupHash: [UInt8]
    var primaryKeyHash: [UInt8]
    var tokens: [UInt8]

    var associatedData: [UInt8] {
        var w = ByteWriter(capacity: 96 + accessGroupHash.count + primaryKeyHash.count + tokens.count)
        w.raw("keyferry.row.v1".utf8)
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

/// The two tiers of an item at rest: metadata sealed under the class's metadata key; the secret
/// sealed under a fresh per-row key that is itself sealed under the class key.
struct SealedRow: Sendable {
    var header: RowHeader
    var metadata: Data
    /// `wrapped row key (72 bytes) || sealed secret`; nil for a tombstone.
    var secret: Data?

    static let wrappedRowKeyCount = SymmetricKey.byteCount + AEAD.overhead
    /// Random bytes one sealing consumes: two nonces and the row key.
    static let entropyPerRow = 3 * AEAD.nonceByteCount + SymmetricKey.byteCount

    /// Seals with randomness taken from `random` (`entropyPerRow` bytes), so test vectors can
    /// fix every byte.
    static func seal(header: RowHeader, metadata: ItemMetadata, secret: Data, keys: ClassKeys, random: [UInt8]) -> SealedRow {
        precondition(random.count == entropyPerRow)
        let ad = header.associatedData
        let n = AEAD.nonceByteCount
        var plain = metadata.encoded
        defer { SymmetricKey.wipe(&plain) }
        let sealedMetadata = AEAD.seal(plain, key: keys.metadataKey, nonce: Array(random[0..<n]), associatedData: ad)
        let rowKey = try! SymmetricKey(bytes: random[(3 * n)...])
        var blob = AEAD.wrap(rowKey, under: keys.classKey, nonce: Array(random[n..<2 * n]), associatedData: ad)
        blob.append(AEAD.seal(secret, key: rowKey, nonce: Array(random[(2 * n)..<(3 * n)]), associatedData: ad))
        return SealedRow(header: header, metadata: sealedMetadata, secret: blob)
    }

    func openMetadata(with key: SymmetricKey) throws -> ItemMetadata {
        try openMetadata(with: key, associatedData: header.associatedData, ItemMetadata.init(decoding:))
    }

    func openSecret(with classKey: SymmetricKey) throws -> Data {
        try openSecret(with: classKey, associatedData: header.associatedData)
    }

    /// Both tiers, with the associated data built once: the system's bulk reads. `decode` reads
    /// the metadata whole (`ItemMetadata`) or leaves its attributes coded (`ItemMetadata.Fields<EncodedAttributes>`).
    func open<Metadata>(with keys: ClassKeys, _ decode: ([UInt8]) throws -> Metadata) throws -> (Metadata, Data) {
        let ad = header.associatedData
        return (try openMetadata(with: keys.metadataKey, associatedData: ad, decode), try openSecret(with: keys.classKey, associatedData: ad))
    }

    func openMetadata<Metadata>(with key: SymmetricKey, associatedData ad: [UInt8], _ decode: ([UInt8]) throws -> Metadata) throws -> Metadata {
        var plain = [UInt8](try AEAD.open(metadata, key: key, associatedData: ad))
        defer { SymmetricKey.wipe(&plain) }
        return try decode(plain)
    }

    func openSecret(with classKey: SymmetricKey, associatedData ad: [UInt8]) throws -> Data {
        guard let secret, secret.count >= Self.wrappedRowKeyCount else { throw CryptoError.authenticationFailed }
        let rowKey = try AEAD.unwrap(secret.prefix(Self.wrappedRowKeyCount), under: classKey, associatedData: ad)
        return try AEAD.open(secret.dropFirst(Self.wrappedRowKeyCount), key: rowKey, associatedData: ad)
    }
}

/// A class key and the metadata key it unwraps, as held in memory while available.
struct ClassKeys: Sendable {
    var classKey: SymmetricKey
    var metadataKey: SymmetricKey
}
