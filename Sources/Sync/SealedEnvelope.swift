import Foundation
import KeychainModel
import KeyferryCrypto

/// Why an envelope, a share or a class-key set was refused. Every case names what was wrong;
/// none is ever applied.
public enum EnvelopeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not an envelope: short, bad framing, an unknown class.
    case malformed(String)
    /// A format version this build does not read.
    case unsupportedFormat(UInt8)
    /// The signature does not verify: edited on the way, or not written by its author.
    case forged(String)
    /// Signed by a device that is not (or no longer) a member.
    case notAMember(String)
    /// For another circle, or a key generation this node does not hold.
    case cannotDecrypt(String)
    /// The sealed item disagrees with the envelope's signed header.
    case inconsistent(String)

    public var description: String {
        switch self {
        case .malformed(let what): "malformed envelope (\(what))"
        case .unsupportedFormat(let version): "envelope format \(version) is newer than this build reads"
        case .forged(let what), .notAMember(let what), .cannotDecrypt(let what), .inconsistent(let what): what
        }
    }
}

/// The header of an envelope: what the relay may see, bound into both seals and the
/// signature. See Protocol/sync.md, "Envelope".
public struct EnvelopeHeader: Hashable, Sendable {
    public var circle: UUID
    public var epoch: UInt32
    public var author: SigningPublicKey
    public var item: UUID
    public var version: HybridTimestamp
    public var syncClass: SyncClass
    public var isTombstone: Bool

    static let magic = Array("KFSE".utf8)
    static let formatVersion: UInt8 = 1
    static let byteCount = 4 + 1 + 16 + 4 + 32 + 16 + 8 + 4 + 1 + 1

    var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.byteCount)
        w.raw(Self.magic)
        w.uint8(Self.formatVersion)
        w.uuid(circle)
        w.uint32(epoch)
        w.raw(author.bytes)
        w.uuid(item)
        w.uint64(version.milliseconds)
        w.uint32(version.counter)
        w.uint8(syncClass.rawValue)
        w.uint8(isTombstone ? 1 : 0)
        return w.bytes
    }

    init(reading r: inout ByteReader) throws {
        guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("no KFSE magic") }
        let format = try r.uint8()
        guard format == Self.formatVersion else { throw EnvelopeError.unsupportedFormat(format) }
        circle = try r.uuid()
        epoch = try r.uint32()
        author = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
        item = try r.uuid()
        version = HybridTimestamp(milliseconds: try r.uint64(), counter: try r.uint32())
        guard let syncClass = SyncClass(rawValue: try r.uint8()) else { throw EnvelopeError.malformed("unknown class") }
        self.syncClass = syncClass
        let flag = try r.uint8()
        guard flag <= 1 else { throw EnvelopeError.malformed("tombstone flag") }
        isTombstone = flag == 1
    }

    init(circle: UUID, epoch: UInt32, author: SigningPublicKey, item: UUID, version: HybridTimestamp, syncClass: SyncClass, isTombstone: Bool) {
        self.circle = circle
        self.epoch = epoch
        self.author = author
        self.item = item
        self.version = version
        self.syncClass = syncClass
        self.isTombstone = isTombstone
    }
}

/// One version of one item on its way between members: the item sealed under a key of its
/// own, that key wrapped by the class key of the circle's current generation, the whole
/// signed by its author. The relay sees the header only; it can neither read, edit nor forge
/// an envelope, and a stale one it replays is recognised by its version.
public struct SealedEnvelope: Hashable, Sendable {
    public let header: EnvelopeHeader
    private let wrappedItemKey: [UInt8]
    private let sealedItem: [UInt8]
    private let signature: [UInt8]

    /// Random bytes one sealing consumes: the item key and two nonces.
    public static let entropyPerEnvelope = SymmetricKey.byteCount + 2 * AEAD.nonceByteCount

    /// Seals `item` for the circle. `random` (`entropyPerEnvelope` bytes) fixes the item key
    /// and nonces, for test vectors; nil draws them from the system.
    public static func seal(_ item: SyncedItem, keys: CircleKeys, author: SigningKey, random: [UInt8]? = nil) throws -> SealedEnvelope {
        guard let syncClass = SyncClass(item.record.protection), SyncEligibility(item.record) == .replicates else {
            throw EnvelopeError.inconsistent("\(item.record.protection.name) items do not sync")
        }
        let random = random ?? SystemEntropy().bytes(entropyPerEnvelope)
        precondition(random.count == entropyPerEnvelope)
        let header = EnvelopeHeader(circle: keys.circle, epoch: keys.epoch, author: author.publicKey, item: item.record.uuid,
                                    version: item.version, syncClass: syncClass, isTombstone: item.isTombstone)
        let ad = header.encoded
        let n = AEAD.nonceByteCount
        let itemKey = try SymmetricKey(bytes: random[0..<SymmetricKey.byteCount])
        let wrapped = AEAD.wrap(itemKey, under: keys.classKey(syncClass), nonce: Array(random[SymmetricKey.byteCount...].prefix(n)), associatedData: ad)
        var payload = item.encoded
        defer { SymmetricKey.wipe(&payload) }
        let sealed = AEAD.seal(payload, key: itemKey, nonce: Array(random.suffix(n)), associatedData: ad)
        let (wrappedItemKey, sealedItem) = ([UInt8](wrapped), [UInt8](sealed))
        return SealedEnvelope(header: header, wrappedItemKey: wrappedItemKey, sealedItem: sealedItem,
                              signature: author.signature(for: signedBytes(header, wrappedItemKey, sealedItem)))
    }

    private init(header: EnvelopeHeader, wrappedItemKey: [UInt8], sealedItem: [UInt8], signature: [UInt8]) {
        self.header = header
        self.wrappedItemKey = wrappedItemKey
        self.sealedItem = sealedItem
        self.signature = signature
    }

    /// Reads the framing only; nothing is trusted until `open`.
    public init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            header = try EnvelopeHeader(reading: &r)
            wrappedItemKey = Array(try r.raw(SymmetricKey.byteCount + AEAD.overhead))
            sealedItem = Array(try r.lengthPrefixed())
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after the signature") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("author key")
        }
    }

    public var bytes: [UInt8] { signedBytes + signature }

    /// Whether the author's signature holds: all a relay can check, knowing no keys.
    public var isSignedByAuthor: Bool { header.author.isValidSignature(signature, for: signedBytes) }

    /// The item, once every check passes: the circle and generation are `keys`', the author
    /// is a member, the signature holds, both seals open, and the item is the one the header
    /// names.
    public func open(with keys: CircleKeys, members: Set<SigningPublicKey>) throws -> SyncedItem {
        guard header.circle == keys.circle else { throw EnvelopeError.cannotDecrypt("the envelope is for another circle") }
        guard members.contains(header.author) else { throw EnvelopeError.notAMember("item \(header.item) was signed by a device outside the circle") }
        guard isSignedByAuthor else { throw EnvelopeError.forged("item \(header.item) has a bad signature") }
        guard header.epoch == keys.epoch else { throw EnvelopeError.cannotDecrypt("item \(header.item) is sealed under key generation \(header.epoch), not \(keys.epoch)") }
        let ad = header.encoded
        guard let itemKey = try? AEAD.unwrap(wrappedItemKey, under: keys.classKey(header.syncClass), associatedData: ad),
              let payload = try? AEAD.open(sealedItem, key: itemKey, associatedData: ad) else {
            throw EnvelopeError.cannotDecrypt("item \(header.item) does not open under its class key")
        }
        let item: SyncedItem
        do { item = try SyncedItem(decoding: [UInt8](payload)) } catch { throw EnvelopeError.inconsistent("item \(header.item) has an unreadable payload") }
        guard item.record.uuid == header.item, item.version == header.version, item.isTombstone == header.isTombstone,
              SyncClass(item.record.protection) == header.syncClass else {
            throw EnvelopeError.inconsistent("item \(header.item): the sealed item disagrees with its header")
        }
        return item
    }

    private var signedBytes: [UInt8] { Self.signedBytes(header, wrappedItemKey, sealedItem) }

    private static func signedBytes(_ header: EnvelopeHeader, _ wrappedItemKey: [UInt8], _ sealedItem: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: EnvelopeHeader.byteCount + wrappedItemKey.count + 4 + sealedItem.count + SigningKey.signatureByteCount)
        w.raw(header.encoded)
        w.raw(wrappedItemKey)
        w.lengthPrefixed(sealedItem)
        return w.bytes
    }
}
