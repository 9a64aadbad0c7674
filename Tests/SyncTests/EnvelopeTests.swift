import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import SyncWire
import Testing

/// The fixed inputs of the envelope test vectors in Protocol/sync.md.
enum EnvelopeVector {
    static let circle = UUID(uuidString: "C1C1C1C1-0000-4000-8000-000000000001")!
    static let author = SigningKey(seed: try! SymmetricKey(bytes: [UInt8](repeating: 0x01, count: 32)))
    static var keys: CircleKeys { CircleKeys(circle: circle, epoch: 1, entropy: SeededEntropy(seed: 1)) }
    static let item = SyncedItem(
        version: HybridTimestamp(milliseconds: 1_790_000_000_000, counter: 2), isTombstone: false,
        record: ItemRecord(
            itemClass: .genericPassword, uuid: UUID(uuidString: "11111111-2222-4333-8444-555555555555")!,
            accessGroup: "TEAM1.com.example.shared", protection: .afterFirstUnlock, synchronizable: true,
            accessControl: nil, creationDate: Date(timeIntervalSinceReferenceDate: 800_000_000),
            modificationDate: Date(timeIntervalSinceReferenceDate: 800_000_060),
            attributes: [.account: .string("alice"), .service: .string("imap.example.com")],
            data: Data("vector-secret".utf8)))

    /// Format 2: the item sealed as a row seals it, then its key block, from
    /// `SeededEntropy(seed: 3)`. BLAKE2b-256 of the envelope's bytes, and their count; the
    /// version's digest; the same for the batch of that one envelope.
    static var envelope: SealedEnvelope { try! SealedEnvelope.seal(item, keys: keys, author: author.publicKey, entropy: SeededEntropy(seed: 3)) }
    static let digest = "55c286455626d11af4eabe51a5dfd03f13498d7ca94a48091b23e765d6a708bf"
    static let byteCount = 379
    static let versionDigest = "98b40e4baaec81821c65694d86af8f7e869ef56bab4515712a4a95ab98183b6f"
    static let batchDigest = "fd681de5cb9aefabb2ff205881123821a4656c74f7325ebe38ca3de363b34a67"
    static let batchByteCount = 544

    /// Format 1, as builds before item keys wrote it and relays still hold it.
    static var payloadEnvelope: SealedEnvelope {
        let random = SeededEntropy(seed: 2).bytes(SealedEnvelope.entropyPerPayloadEnvelope)
        return try! SealedEnvelope.sealPayload(item, keys: keys, author: author.publicKey, random: random)
    }
    static let payloadDigest = "9cf711398fdbf6ebb45e8b12e1ff3378c88842a920813e9d95d8326833902fc4"
    static let payloadByteCount = 359
    static let payloadBatchDigest = "45f908e9e1639b759a92b6c0c009be6865ca27caa63ef249a9e1cd7f7bdf221e"
    static let payloadBatchByteCount = 524
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("Envelopes")
struct EnvelopeTests {
    private let keys = EnvelopeVector.keys
    private let author = EnvelopeVector.author
    private var members: Set<SigningPublicKey> { [author.publicKey] }

    /// `envelope` and the batch of it alone have the digests and sizes a vector gives, read back
    /// whole, and open to the vector's item: the contents, for what else the vector says.
    private func expectVector(_ envelope: SealedEnvelope, digest: String, byteCount: Int, batchDigest: String, batchByteCount: Int) throws
        -> SealedEnvelope.Contents
    {
        #expect(hex(ContentDigest.of(envelope.bytes)) == digest)
        #expect(envelope.bytes.count == byteCount)
        let batch = EnvelopeBatch([envelope], circle: EnvelopeVector.circle, author: author)
        #expect(hex(ContentDigest.of(batch.bytes)) == batchDigest)
        #expect(batch.bytes.count == batchByteCount)
        let read = try EnvelopeBatch(bytes: batch.bytes).verified(members: members)
        #expect(read == [envelope])
        let contents = try read[0].open(with: keys)
        #expect(try contents.openedItem() == EnvelopeVector.item)
        return contents
    }

    @Test("the test vector of Protocol/sync.md: fixed keys and randomness give fixed bytes, which open to the item")
    func vector() throws {
        let contents = try expectVector(
            EnvelopeVector.envelope, digest: EnvelopeVector.digest, byteCount: EnvelopeVector.byteCount,
            batchDigest: EnvelopeVector.batchDigest, batchByteCount: EnvelopeVector.batchByteCount)
        #expect(contents.stamp == VersionStamp(timestamp: EnvelopeVector.item.version, digest: try #require(Hex.decode(EnvelopeVector.versionDigest))))
    }

    /// Builds the format 2 vector from its inputs with PyNaCl (libsodium's XChaCha20-Poly1305
    /// and Ed25519) and hashlib, following Protocol/store.md and Protocol/sync.md alone.
    static let independentBuilder = #"""
        import hashlib, struct, sys, uuid
        from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt as seal, crypto_sign_seed_keypair, crypto_sign
        key, n_metadata, n_secret, n_block, class_c = (bytes.fromhex(a) for a in sys.argv[1:6])
        u32 = lambda v: struct.pack("<I", v)
        u64 = lambda v: struct.pack("<Q", v)
        lp = lambda b: u32(len(b)) + b
        s = lambda t: lp(t.encode())
        f64 = lambda x: struct.pack("<d", x)
        item = uuid.UUID("11111111-2222-4333-8444-555555555555").bytes
        circle = uuid.UUID("C1C1C1C1-0000-4000-8000-000000000001").bytes
        attributes = sorted([("acct", "alice"), ("svce", "imap.example.com")])
        metadata = (b"\x01" + s("TEAM1.com.example.shared") + f64(800000000) + f64(800000060) + b"\x00" + lp(b"")
            + u32(len(attributes)) + b"".join(s(k) + lp(b"\x01" + v.encode()) for k, v in attributes))
        item_ad = lambda tier: b"keyferry.item.v2" + item + s("genp") + bytes([tier])
        sealed_metadata = n_metadata + seal(metadata, item_ad(1), n_metadata, key)
        sealed_secret = n_secret + seal(b"vector-secret", item_ad(2), n_secret, key)
        public, private = crypto_sign_seed_keypair(b"\x01" * 32)
        header = b"KFSE\x02" + circle + u32(1) + public + item + u64(1790000000000) + u32(2) + b"\x43\x00"
        block = n_block + seal(key + s("genp") + s("ck"), header, n_block, class_c)
        envelope = header + lp(block) + lp(sealed_metadata) + lp(sealed_secret)
        signed = b"KFSB\x02" + circle + public + u64(1) + bytes(32) + u32(1) + lp(envelope)
        batch = signed + crypto_sign(signed, private)[:64]
        version = (b"keyferry.sync.version.v2" + item + u64(1790000000000) + u32(2) + b"\x00" + s("genp") + s("ck")
            + lp(sealed_metadata) + lp(sealed_secret))
        print(envelope.hex(), batch.hex(), hashlib.blake2b(version, digest_size=32).hexdigest())
        """#

    @Test("an independent implementation (PyNaCl, hashlib) builds the format 2 vector's envelope, batch and version digest byte for byte")
    func independentVector() throws {
        let entropy = SeededEntropy(seed: 3)
        let inputs = [entropy.bytes(32), entropy.bytes(24), entropy.bytes(24), entropy.bytes(24), keys.classKey(.c).exportedBytes]
        let words = try OutsideReaders.pythonWords(Self.independentBuilder, inputs.map(hex))
        try #require(words.count == 3, "the independent builder printed \(words.count) words")
        let envelope = EnvelopeVector.envelope
        #expect(words[0] == hex(envelope.bytes))
        #expect(words[1] == hex(EnvelopeBatch([envelope], circle: EnvelopeVector.circle, author: author).bytes))
        #expect(words[2] == EnvelopeVector.versionDigest)
    }

    @Test("the format 1 vector of Protocol/sync.md, as builds before item keys wrote it, still opens")
    func payloadVector() throws {
        let contents = try expectVector(
            EnvelopeVector.payloadEnvelope, digest: EnvelopeVector.payloadDigest, byteCount: EnvelopeVector.payloadByteCount,
            batchDigest: EnvelopeVector.payloadBatchDigest, batchByteCount: EnvelopeVector.payloadBatchByteCount)
        #expect(contents.stamp == EnvelopeVector.item.stamp)
    }

    @Test("the relay sees headers only: no attribute, group or secret appears in a batch's bytes")
    func opaqueToTheRelay() throws {
        let bytes = EnvelopeBatch([EnvelopeVector.envelope, EnvelopeVector.payloadEnvelope], circle: EnvelopeVector.circle, author: author).bytes
        for marker in ["alice", "imap.example.com", "TEAM1.com.example.shared", "vector-secret", "genp"] {
            #expect(bytes.firstRange(of: Array(marker.utf8)) == nil, "\(marker) is readable")
        }
    }

    @Test("every edited byte of a batch is refused, and nothing is ever opened from it")
    func tampering() throws {
        let bytes = EnvelopeBatch([EnvelopeVector.envelope, EnvelopeVector.payloadEnvelope], circle: EnvelopeVector.circle, author: author).bytes
        for index in bytes.indices {
            var edited = bytes
            edited[index] ^= 0x01
            #expect(throws: EnvelopeError.self) { try EnvelopeBatch(bytes: edited).verified(members: members).map { try $0.open(with: keys) } }
        }
        for cut in [0, 4, 50, bytes.count / 2, bytes.count - 1] {
            #expect(throws: EnvelopeError.malformed("truncated")) { try EnvelopeBatch(bytes: Array(bytes.prefix(cut))) }
        }
        #expect(throws: EnvelopeError.malformed("bytes after the signature")) { try EnvelopeBatch(bytes: bytes + [0]) }
        for format: UInt8 in [1, 3] {
            var other = bytes
            other[4] = format
            #expect(throws: EnvelopeError.unsupportedFormat(format)) { try EnvelopeBatch(bytes: other) }
        }
        for envelope in [EnvelopeVector.envelope.bytes, EnvelopeVector.payloadEnvelope.bytes] {
            #expect(throws: EnvelopeError.malformed("truncated")) { try SealedEnvelope(bytes: Array(envelope.dropLast())) }
            #expect(throws: EnvelopeError.malformed("bytes after the sealed item")) { try SealedEnvelope(bytes: envelope + [0]) }
            for format: UInt8 in [0, 3] {
                var other = envelope
                other[4] = format
                #expect(throws: EnvelopeError.unsupportedFormat(format)) { try SealedEnvelope(bytes: other) }
            }
        }
    }

    @Test("a batch from outside the circle or naming another author does not verify; an envelope under another generation or for another circle does not open")
    func trust() throws {
        let stranger = SigningKey(seed: SymmetricKey())
        let foreign = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: stranger.publicKey)
        let forged = EnvelopeBatch([foreign], circle: EnvelopeVector.circle, author: stranger)
        #expect(throws: EnvelopeError.notAMember("a batch of 1 envelope signed by a device outside the circle")) {
            try EnvelopeBatch(bytes: forged.bytes).verified(members: members)
        }
        // A stranger's batch passing off a member's envelope as its own, or the reverse.
        var mixed = forged.bytes
        let authorAt = 4 + 1 + 16
        mixed.replaceSubrange(authorAt..<authorAt + 32, with: author.publicKey.bytes)
        #expect(throws: EnvelopeError.self) { try EnvelopeBatch(bytes: mixed).verified(members: members) }

        let envelope = EnvelopeVector.envelope
        let next = CircleKeys(circle: EnvelopeVector.circle, epoch: 2)
        #expect(throws: EnvelopeError.self) { try envelope.open(with: next) }
        let other = CircleKeys(circle: UUID(), epoch: 1, entropy: SeededEntropy(seed: 1))
        #expect(throws: EnvelopeError.self) { try envelope.open(with: other) }
        // The same generation number with other keys: a removed member's old keys.
        let impostor = CircleKeys(circle: EnvelopeVector.circle, epoch: 1)
        #expect(throws: EnvelopeError.self) { try envelope.open(with: impostor) }
    }

    @Test("pushes are cut into batches of at most 1,000 envelopes and 1 MiB, in order")
    func batching() throws {
        let small = try (0..<2_500).map { _ in try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author.publicKey) }
        let start = BatchLink(sequence: 41, digest: [UInt8](repeating: 9, count: 32))
        let batches = EnvelopeBatch.batches(of: small, circle: EnvelopeVector.circle, author: author, after: start)
        #expect(batches.map(\.envelopes.count) == [1_000, 1_000, 500])
        #expect(batches.flatMap(\.envelopes) == small)
        #expect(batches.map(\.sequence) == [42, 43, 44], "each batch is the next of its author's chain")
        #expect(batches.map(\.previous) == [start.digest, batches[0].link.digest, batches[1].link.digest])
        var large = EnvelopeVector.item
        large.record.data = Data(repeating: 7, count: 400_000)
        let big = try (0..<5).map { _ in try SealedEnvelope.seal(large, keys: keys, author: author.publicKey) }
        #expect(EnvelopeBatch.batches(of: big, circle: EnvelopeVector.circle, author: author, after: .start).map(\.envelopes.count) == [2, 2, 1])
    }

    @Test("tombstones travel; device-bound and local items refuse to be sealed")
    func eligibility() throws {
        var tombstone = EnvelopeVector.item
        tombstone.isTombstone = true
        tombstone.record.data = nil
        let envelope = try SealedEnvelope.seal(tombstone, keys: keys, author: author.publicKey)
        #expect(envelope.header.isTombstone)
        #expect(try envelope.open(with: keys).openedItem() == tombstone)
        #expect(try SealedEnvelope.sealPayload(tombstone, keys: keys, author: author.publicKey).open(with: keys).openedItem() == tombstone)

        for protection in [ProtectionClass.whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly] {
            var local = EnvelopeVector.item
            local.record.protection = protection
            #expect(SyncEligibility(local.record) == .deviceBound)
            #expect(throws: EnvelopeError.self) { try SealedEnvelope.seal(local, keys: keys, author: author.publicKey) }
            #expect(throws: EnvelopeError.self) { try SealedEnvelope.sealPayload(local, keys: keys, author: author.publicKey) }
        }
        var unsynced = EnvelopeVector.item
        unsynced.record.synchronizable = false
        #expect(SyncEligibility(unsynced.record) == .notSynchronizable)
        #expect(throws: EnvelopeError.self) { try SealedEnvelope.sealPayload(unsynced, keys: keys, author: author.publicKey) }
        #expect(SyncClass(.whenUnlocked) == .a && SyncClass(.afterFirstUnlock) == .c && SyncClass(.always) == .c)
    }

    @Test("class keys open only under their circle key; shares only for their recipient, from a member")
    func circleKeys() throws {
        let wrapped = keys.wrappedClassKeys()
        let member = SealingKey(seed: SymmetricKey())
        let share = CircleKeyShare(keys, to: member.publicKey, from: author)
        let circleKey = try share.open(with: member, trusting: members)
        let opened = try CircleKeys(circle: keys.circle, epoch: 1, circleKey: circleKey, wrappedClassKeys: wrapped)
        for syncClass in SyncClass.allCases { #expect(opened.classKey(syncClass) == keys.classKey(syncClass)) }
        #expect(try EnvelopeVector.envelope.open(with: opened).openedItem() == EnvelopeVector.item)

        #expect(throws: EnvelopeError.self) { try CircleKeys(circle: keys.circle, epoch: 1, circleKey: SymmetricKey(), wrappedClassKeys: wrapped) }
        #expect(throws: EnvelopeError.self) { try CircleKeys(circle: keys.circle, epoch: 2, circleKey: circleKey, wrappedClassKeys: wrapped) }
        #expect(throws: EnvelopeError.self) { try share.open(with: SealingKey(seed: SymmetricKey()), trusting: members) }
        #expect(throws: EnvelopeError.self) { try share.open(with: member, trusting: [SigningKey(seed: SymmetricKey()).publicKey]) }
    }
}
