package import Foundation
package import KeychainModel
package import KeyferryCrypto

/// Why an envelope, a share or a class-key set was refused. Every case names what was wrong;
/// none is ever applied.
package enum EnvelopeError: Error, Equatable, Sendable, CustomStringConvertible {
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

    package var description: String {
        switch self {
        case .malformed(let what): "malformed envelope (\(what))"
        case .unsupportedFormat(let version):
            "format \(version) is not one this build reads (batches of format \(EnvelopeBatch.formatVersion), envelopes of formats \(EnvelopeHeader.formats.lowerBound) and \(EnvelopeHeader.formats.upperBound)): its author runs another version of Keyferry"
        case .forged(let what), .notAMember(let what), .cannotDecrypt(let what), .inconsistent(let what): what
        }
    }
}

/// The header of an envelope: what the relay may see, bound into its seals and the batch's
/// signature. See Protocol/sync.md, "Envelope".
package struct EnvelopeHeader: Hashable, Sendable {
    /// 2 for an item that travels as its keychain stores it (`KeyedItem`); 1 for the whole
    /// item sealed afresh, as builds before item keys wrote it.
    package var format: UInt8
    package var circle: UUID
    package var epoch: UInt32
    package var author: SigningPublicKey
    package var item: UUID
    package var version: HybridTimestamp
    package var syncClass: SyncClass
    package var isTombstone: Bool

    static let magic = Array("KFSE".utf8)
    /// The format this build writes.
    static let formatVersion: UInt8 = 2
    /// The formats this build reads.
    static let formats: ClosedRange<UInt8> = 1...2
    static let byteCount = 4 + 1 + 16 + 4 + 32 + 16 + 8 + 4 + 1 + 1

    var encoded: [UInt8] {
        var w = ByteWriter(capacity: Self.byteCount)
        w.raw(Self.magic)
        w.uint8(format)
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
        format = try r.uint8()
        guard Self.formats.contains(format) else { throw EnvelopeError.unsupportedFormat(format) }
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

    init(
        format: UInt8, circle: UUID, epoch: UInt32, author: SigningPublicKey, item: UUID, version: HybridTimestamp,
        syncClass: SyncClass, isTombstone: Bool
    ) {
        self.format = format
        self.circle = circle
        self.epoch = epoch
        self.author = author
        self.item = item
        self.version = version
        self.syncClass = syncClass
        self.isTombstone = isTombstone
    }
}

/// One version of an item as its author's keychain holds it sealed (Protocol/store.md): a key
/// of its own, and the item's metadata and secret each sealed under that key. Format 2
/// envelopes carry the key re-wrapped and the two ciphertexts as they are, so neither the
/// author nor a receiver seals the item again. `secret` is empty for a tombstone.
package struct KeyedItem: Sendable {
    package var uuid: UUID
    package var itemClass: ItemClass
    package var protection: ProtectionClass
    package var version: HybridTimestamp
    package var isTombstone: Bool
    package var key: SymmetricKey
    package var metadata: Data
    package var secret: Data

    package init(
        uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, version: HybridTimestamp, isTombstone: Bool,
        key: SymmetricKey, metadata: Data, secret: Data
    ) {
        self.uuid = uuid
        self.itemClass = itemClass
        self.protection = protection
        self.version = version
        self.isTombstone = isTombstone
        self.key = key
        self.metadata = metadata
        self.secret = secret
    }

    /// What the merge rule compares: the version, and BLAKE2b-256 of the version's identity and
    /// its two ciphertexts. Every member computes it from the same envelope; sealed under a
    /// random key, the ciphertexts tell nothing of the secret, so the digest is safe to keep.
    package var stamp: VersionStamp {
        var w = ByteWriter(capacity: 96 + metadata.count + secret.count)
        w.raw("keyferry.sync.version.v2".utf8)
        w.uuid(uuid)
        w.uint64(version.milliseconds)
        w.uint32(version.counter)
        w.uint8(isTombstone ? 1 : 0)
        w.string(itemClass.rawValue)
        w.string(protection.rawValue)
        w.lengthPrefixed(metadata)
        w.lengthPrefixed(secret)
        return VersionStamp(timestamp: version, digest: ContentDigest.of(w.bytes))
    }
}

/// One version of one item on its way between members, its item key wrapped by the class key
/// of the circle's current generation. Envelopes travel in batches signed by their author
/// (`EnvelopeBatch`). The relay sees the header only; it can neither read, edit nor forge an
/// envelope, and a stale one it replays is recognised by its version.
package struct SealedEnvelope: Hashable, Sendable {
    package let header: EnvelopeHeader
    private let body: Body

    private enum Body: Hashable, Sendable {
        /// Format 1: the item key wrapped (72 bytes), and the payload sealed under it.
        case payload(wrappedItemKey: [UInt8], sealedItem: [UInt8])
        /// Format 2: the key block sealed under the class key, and the keychain's ciphertexts.
        case keyed(sealedKeyBlock: [UInt8], metadata: [UInt8], secret: [UInt8])
    }

    /// Random bytes a format 2 sealing consumes: the key block's nonce.
    package static let entropyPerEnvelope = AEAD.nonceByteCount
    /// Random bytes a format 1 sealing consumes: the item key and two nonces.
    package static let entropyPerPayloadEnvelope = SymmetricKey.byteCount + 2 * AEAD.nonceByteCount

    /// Seals `item` for the circle, written by `author`: its key, class and protection in a key
    /// block under the class key, its ciphertexts as they are. `random`
    /// (`entropyPerEnvelope` bytes) fixes the nonce, for test vectors; nil draws it.
    package static func seal(_ item: KeyedItem, keys: CircleKeys, author: SigningPublicKey, random: [UInt8]? = nil) throws -> SealedEnvelope {
        guard let syncClass = SyncClass(item.protection) else { throw EnvelopeError.inconsistent("\(item.protection.name) items do not sync") }
        guard item.isTombstone == item.secret.isEmpty else { throw EnvelopeError.inconsistent("a tombstone carries no secret, and an item always one") }
        let random = random ?? SystemEntropy().bytes(entropyPerEnvelope)
        precondition(random.count == entropyPerEnvelope)
        let header = EnvelopeHeader(
            format: EnvelopeHeader.formatVersion, circle: keys.circle, epoch: keys.epoch, author: author, item: item.uuid, version: item.version,
            syncClass: syncClass, isTombstone: item.isTombstone)
        var block = item.key.exportedBytes
        defer { SymmetricKey.wipe(&block) }
        var w = ByteWriter(capacity: SymmetricKey.byteCount + 16)
        w.raw(block)
        w.string(item.itemClass.rawValue)
        w.string(item.protection.rawValue)
        block = w.bytes
        let sealed = AEAD.seal(block, key: keys.classKey(syncClass), nonce: random, associatedData: header.encoded)
        return SealedEnvelope(header: header, body: .keyed(sealedKeyBlock: [UInt8](sealed), metadata: [UInt8](item.metadata), secret: [UInt8](item.secret)))
    }

    /// Seals the whole `item` in format 1, as builds before item keys did: what the tests of
    /// those builds' batches, still on relays and still read, are made with. `random`
    /// (`entropyPerPayloadEnvelope` bytes) fixes the item key and nonces.
    package static func sealPayload(_ item: SyncedItem, keys: CircleKeys, author: SigningPublicKey, random: [UInt8]? = nil) throws -> SealedEnvelope {
        guard let syncClass = SyncClass(item.record.protection), SyncEligibility(item.record) == .replicates else {
            throw EnvelopeError.inconsistent("\(item.record.protection.name) items do not sync")
        }
        let random = random ?? SystemEntropy().bytes(entropyPerPayloadEnvelope)
        precondition(random.count == entropyPerPayloadEnvelope)
        let header = EnvelopeHeader(
            format: 1, circle: keys.circle, epoch: keys.epoch, author: author, item: item.record.uuid,
            version: item.version, syncClass: syncClass, isTombstone: item.isTombstone)
        let ad = header.encoded
        let n = AEAD.nonceByteCount
        let itemKey = try SymmetricKey(bytes: random[0..<SymmetricKey.byteCount])
        let wrapped = AEAD.wrap(itemKey, under: keys.classKey(syncClass), nonce: Array(random[SymmetricKey.byteCount...].prefix(n)), associatedData: ad)
        var payload = item.encoded
        defer { SymmetricKey.wipe(&payload) }
        let sealed = AEAD.seal(payload, key: itemKey, nonce: Array(random.suffix(n)), associatedData: ad)
        return SealedEnvelope(header: header, body: .payload(wrappedItemKey: [UInt8](wrapped), sealedItem: [UInt8](sealed)))
    }

    private init(header: EnvelopeHeader, body: Body) {
        self.header = header
        self.body = body
    }

    /// Reads the framing only; nothing is trusted until its batch's signature is checked and
    /// it opens.
    package init(bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        try self.init(reading: &r)
        guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after the sealed item") }
    }

    init(reading r: inout ByteReader) throws {
        do {
            header = try EnvelopeHeader(reading: &r)
            if header.format == 1 {
                body = .payload(wrappedItemKey: Array(try r.raw(SymmetricKey.byteCount + AEAD.overhead)), sealedItem: Array(try r.lengthPrefixed()))
            } else {
                body = .keyed(sealedKeyBlock: Array(try r.lengthPrefixed()), metadata: Array(try r.lengthPrefixed()), secret: Array(try r.lengthPrefixed()))
            }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("author key")
        }
    }

    package var bytes: [UInt8] {
        var w = ByteWriter(capacity: byteCount)
        write(to: &w)
        return w.bytes
    }

    var byteCount: Int {
        switch body {
        case .payload(let wrapped, let sealed): EnvelopeHeader.byteCount + wrapped.count + 4 + sealed.count
        case .keyed(let block, let metadata, let secret): EnvelopeHeader.byteCount + 12 + block.count + metadata.count + secret.count
        }
    }

    func write(to w: inout ByteWriter) {
        w.raw(header.encoded)
        switch body {
        case .payload(let wrapped, let sealed):
            w.raw(wrapped)
            w.lengthPrefixed(sealed)
        case .keyed(let block, let metadata, let secret):
            w.lengthPrefixed(block)
            w.lengthPrefixed(metadata)
            w.lengthPrefixed(secret)
        }
    }

    /// What an envelope holds once open: the whole item (format 1), or the item as its
    /// author's keychain sealed it (format 2), whose metadata the keychain opens.
    package enum Contents: Sendable {
        case whole(SyncedItem)
        case keyed(KeyedItem)

        package var stamp: VersionStamp {
            switch self {
            case .whole(let item): item.stamp
            case .keyed(let item): item.stamp
            }
        }
    }

    /// The contents, once the envelope opens under `keys` and what it holds is the item the
    /// header names. Only for an envelope whose batch's signature has been checked
    /// (`EnvelopeBatch.verified(members:)`): the seals prove a member of the circle wrote it,
    /// the signature which one.
    package func open(with keys: CircleKeys) throws -> Contents {
        guard header.circle == keys.circle else { throw EnvelopeError.cannotDecrypt("the envelope is for another circle") }
        guard header.epoch == keys.epoch else {
            throw EnvelopeError.cannotDecrypt("item \(header.item) is sealed under key generation \(header.epoch), not \(keys.epoch)")
        }
        let ad = header.encoded
        let classKey = keys.classKey(header.syncClass)
        let unopened = EnvelopeError.cannotDecrypt("item \(header.item) does not open under its class key")
        switch body {
        case .payload(let wrapped, let sealed):
            guard let itemKey = try? AEAD.unwrap(wrapped, under: classKey, associatedData: ad),
                let payload = try? AEAD.open(sealed, key: itemKey, associatedData: ad)
            else { throw unopened }
            let item: SyncedItem
            do { item = try SyncedItem(decoding: [UInt8](payload)) } catch { throw EnvelopeError.inconsistent("item \(header.item) has an unreadable payload") }
            guard item.record.uuid == header.item, item.version == header.version, item.isTombstone == header.isTombstone,
                SyncClass(item.record.protection) == header.syncClass
            else {
                throw EnvelopeError.inconsistent("item \(header.item): the sealed item disagrees with its header")
            }
            return .whole(item)
        case .keyed(let sealedBlock, let metadata, let secret):
            guard let opened = try? AEAD.open(sealedBlock, key: classKey, associatedData: ad) else { throw unopened }
            var block = [UInt8](opened)
            defer { SymmetricKey.wipe(&block) }
            var r = ByteReader(block)
            guard let key = try? SymmetricKey(bytes: r.raw(SymmetricKey.byteCount)), let itemClass = try? ItemClass(rawValue: r.string()),
                let protection = try? ProtectionClass(rawValue: r.string()), r.isAtEnd
            else { throw EnvelopeError.inconsistent("item \(header.item) has an unreadable key block") }
            guard SyncClass(protection) == header.syncClass, header.isTombstone == secret.isEmpty else {
                throw EnvelopeError.inconsistent("item \(header.item): the sealed item disagrees with its header")
            }
            return .keyed(
                KeyedItem(
                    uuid: header.item, itemClass: itemClass, protection: protection, version: header.version, isTombstone: header.isTombstone,
                    key: key, metadata: Data(metadata), secret: Data(secret)))
        }
    }
}

/// The envelopes one member pushes at once, signed once by their author: the unit the relay
/// keeps and serves. One signature per batch instead of per envelope, because checking
/// Ed25519 signatures was most of a receiver's work; every envelope is still covered by its
/// author's signature, and none is opened before that signature holds. See Protocol/sync.md,
/// "Batch".
package struct EnvelopeBatch: Sendable {
    package let circle: UUID
    package let author: SigningPublicKey
    /// Where the batch stands in its author's chain: its sequence (1 for the author's first)
    /// and the digest of the batch before it (32 zero bytes for the first). A reader that sees
    /// a sequence skipped knows a batch was withheld from it.
    package let sequence: UInt64
    package let previous: [UInt8]
    package let envelopes: [SealedEnvelope]
    private let signature: [UInt8]

    static let magic = Array("KFSB".utf8)
    /// 2 since batches are chained per author.
    static let formatVersion: UInt8 = 2
    /// Envelopes in one batch: a receiver writes a batch in one transaction.
    package static let maximumCount = 1_000
    /// Envelope bytes in one batch (but always one envelope), well inside a relay record.
    package static let maximumBytes = 1 << 20

    /// Signs `envelopes`, which `author` sealed for `circle`, as the next batch of its chain.
    package init(_ envelopes: [SealedEnvelope], circle: UUID, author: SigningKey, after link: BatchLink = .start) {
        precondition(envelopes.allSatisfy { $0.header.circle == circle && $0.header.author == author.publicKey })
        self.circle = circle
        self.author = author.publicKey
        sequence = link.sequence + 1
        previous = link.digest
        self.envelopes = envelopes
        signature = author.signature(for: Self.signedBytes(circle, author.publicKey, sequence, previous, envelopes))
    }

    /// This batch as the head of its author's chain.
    package var link: BatchLink { BatchLink(sequence: sequence, digest: ContentDigest.of(bytes)) }

    /// `envelopes` cut into batches of at most `maximumCount` envelopes and `maximumBytes`, in
    /// order, chained after `link`.
    package static func batches(of envelopes: [SealedEnvelope], circle: UUID, author: SigningKey, after link: BatchLink) -> [EnvelopeBatch] {
        var batches: [EnvelopeBatch] = []
        var current: [SealedEnvelope] = []
        var bytes = 0
        func close() {
            batches.append(EnvelopeBatch(current, circle: circle, author: author, after: batches.last?.link ?? link))
            (current, bytes) = ([], 0)
        }
        for envelope in envelopes {
            if !current.isEmpty, current.count == maximumCount || bytes + envelope.byteCount > maximumBytes { close() }
            current.append(envelope)
            bytes += envelope.byteCount
        }
        if !current.isEmpty { close() }
        return batches
    }

    /// Reads the framing, and checks that every envelope names the batch's circle and author;
    /// nothing is trusted until `verified(members:)`.
    package init(bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        do {
            guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("no KFSB magic") }
            let format = try r.uint8()
            guard format == Self.formatVersion else { throw EnvelopeError.unsupportedFormat(format) }
            circle = try r.uuid()
            author = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            sequence = try r.uint64()
            previous = Array(try r.raw(32))
            guard sequence >= 1 else { throw EnvelopeError.malformed("a batch numbered 0") }
            let count = Int(try r.uint32())
            guard count >= 1, count <= Self.maximumCount else { throw EnvelopeError.malformed("a batch of \(count) envelopes") }
            var envelopes: [SealedEnvelope] = []
            envelopes.reserveCapacity(count)
            for _ in 0..<count {
                var envelopeReader = ByteReader(try r.lengthPrefixed())
                let envelope = try SealedEnvelope(reading: &envelopeReader)
                guard envelopeReader.isAtEnd else { throw EnvelopeError.malformed("bytes after an envelope's sealed item") }
                envelopes.append(envelope)
            }
            self.envelopes = envelopes
            signature = Array(try r.raw(SigningKey.signatureByteCount))
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("author key")
        }
        guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after the signature") }
        guard envelopes.allSatisfy({ $0.header.circle == circle && $0.header.author == author }) else {
            throw EnvelopeError.inconsistent("an envelope names another circle or author than its batch")
        }
    }

    package var bytes: [UInt8] { Self.signedBytes(circle, author, sequence, previous, envelopes) + signature }

    /// The envelopes, once their author is a member and the signature holds.
    package func verified(members: Set<SigningPublicKey>) throws -> [SealedEnvelope] {
        guard members.contains(author) else {
            throw EnvelopeError.notAMember("\(description) signed by a device outside the circle")
        }
        guard author.isValidSignature(signature, for: Self.signedBytes(circle, author, sequence, previous, envelopes)) else {
            throw EnvelopeError.forged("\(description) with a bad signature")
        }
        return envelopes
    }

    private var description: String { "a batch of \(envelopes.count) envelope\(envelopes.count == 1 ? "" : "s")" }

    private static func signedBytes(
        _ circle: UUID, _ author: SigningPublicKey, _ sequence: UInt64, _ previous: [UInt8],
        _ envelopes: [SealedEnvelope]
    ) -> [UInt8] {
        var w = ByteWriter(capacity: 4 + 1 + 16 + 32 + 8 + 32 + 4 + envelopes.reduce(0) { $0 + 4 + $1.byteCount } + SigningKey.signatureByteCount)
        w.raw(Self.magic)
        w.uint8(Self.formatVersion)
        w.uuid(circle)
        w.raw(author.bytes)
        w.uint64(sequence)
        w.raw(previous)
        w.uint32(UInt32(envelopes.count))
        for envelope in envelopes {
            w.uint32(UInt32(envelope.byteCount))
            envelope.write(to: &w)
        }
        return w.bytes
    }
}

/// The head of an author's chain of batches: its last batch's sequence and digest.
package struct BatchLink: Hashable, Sendable, Codable {
    package var sequence: UInt64
    package var digest: [UInt8]

    /// Before an author's first batch.
    package static let start = BatchLink(sequence: 0, digest: [UInt8](repeating: 0, count: 32))

    package init(sequence: UInt64, digest: [UInt8]) {
        self.sequence = sequence
        self.digest = digest
    }
}
