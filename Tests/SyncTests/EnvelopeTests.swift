import Foundation
import KeychainModel
import KeyferryCrypto
import Sync
import Testing

/// The fixed inputs of the envelope test vector in Protocol/sync.md.
enum EnvelopeVector {
    static let circle = UUID(uuidString: "C1C1C1C1-0000-4000-8000-000000000001")!
    static let author = SigningKey(seed: try! SymmetricKey(bytes: [UInt8](repeating: 0x01, count: 32)))
    static var keys: CircleKeys { CircleKeys(circle: circle, epoch: 1, entropy: SeededEntropy(seed: 1)) }
    static var random: [UInt8] { SeededEntropy(seed: 2).bytes(SealedEnvelope.entropyPerEnvelope) }
    static let item = SyncedItem(
        version: HybridTimestamp(milliseconds: 1_790_000_000_000, counter: 2), isTombstone: false,
        record: ItemRecord(itemClass: .genericPassword, uuid: UUID(uuidString: "11111111-2222-4333-8444-555555555555")!,
                           accessGroup: "TEAM1.com.example.shared", protection: .afterFirstUnlock, synchronizable: true,
                           accessControl: nil, creationDate: Date(timeIntervalSinceReferenceDate: 800_000_000),
                           modificationDate: Date(timeIntervalSinceReferenceDate: 800_000_060),
                           attributes: [.account: .string("alice"), .service: .string("imap.example.com")],
                           data: Data("vector-secret".utf8)))
    /// BLAKE2b-256 of the envelope's bytes, and their count.
    static let digest = "8cf423e5fa341096f124ba6bb5ceb02f1a13bf23644beaf8671c6bb341d011d2"
    static let byteCount = 423
}

@Suite("Envelopes")
struct EnvelopeTests {
    private let keys = EnvelopeVector.keys
    private let author = EnvelopeVector.author
    private var members: Set<SigningPublicKey> { [author.publicKey] }

    @Test("the test vector of Protocol/sync.md: fixed keys and randomness give fixed bytes, which open to the item")
    func vector() throws {
        let envelope = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author, random: EnvelopeVector.random)
        #expect(ContentDigest.of(envelope.bytes).map { String(format: "%02x", $0) }.joined() == EnvelopeVector.digest)
        #expect(envelope.bytes.count == EnvelopeVector.byteCount)
        let read = try SealedEnvelope(bytes: envelope.bytes)
        #expect(read == envelope)
        #expect(try read.open(with: keys, members: members) == EnvelopeVector.item)
    }

    @Test("the relay sees the header only: no attribute, group or secret appears in the bytes")
    func opaqueToTheRelay() throws {
        let bytes = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author).bytes
        for marker in ["alice", "imap.example.com", "TEAM1.com.example.shared", "vector-secret"] {
            #expect(bytes.firstRange(of: Array(marker.utf8)) == nil, "\(marker) is readable")
        }
    }

    @Test("every edited byte is refused, and nothing is ever opened from it")
    func tampering() throws {
        let bytes = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author).bytes
        for index in bytes.indices {
            var edited = bytes
            edited[index] ^= 0x01
            #expect(throws: EnvelopeError.self) { try SealedEnvelope(bytes: edited).open(with: keys, members: members) }
        }
        for cut in [0, 4, 50, bytes.count / 2, bytes.count - 1] {
            #expect(throws: EnvelopeError.malformed("truncated")) { try SealedEnvelope(bytes: Array(bytes.prefix(cut))) }
        }
        #expect(throws: EnvelopeError.malformed("bytes after the signature")) { try SealedEnvelope(bytes: bytes + [0]) }
        var newer = bytes
        newer[4] = 2
        #expect(throws: EnvelopeError.unsupportedFormat(2)) { try SealedEnvelope(bytes: newer) }
    }

    @Test("an envelope from outside the circle, under another generation or for another circle does not open")
    func trust() throws {
        let stranger = SigningKey(seed: SymmetricKey())
        let forged = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: stranger)
        #expect(forged.isSignedByAuthor, "well signed, by the wrong device")
        #expect(throws: EnvelopeError.self) { try forged.open(with: keys, members: members) }
        let envelope = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author)
        let next = CircleKeys(circle: EnvelopeVector.circle, epoch: 2)
        #expect(throws: EnvelopeError.self) { try envelope.open(with: next, members: members) }
        let other = CircleKeys(circle: UUID(), epoch: 1, entropy: SeededEntropy(seed: 1))
        #expect(throws: EnvelopeError.self) { try envelope.open(with: other, members: members) }
        // The same generation number with other keys: a removed member's old keys.
        let impostor = CircleKeys(circle: EnvelopeVector.circle, epoch: 1)
        #expect(throws: EnvelopeError.self) { try envelope.open(with: impostor, members: members) }
    }

    @Test("tombstones travel; device-bound and local items refuse to be sealed")
    func eligibility() throws {
        var tombstone = EnvelopeVector.item
        tombstone.isTombstone = true
        tombstone.record.data = nil
        let envelope = try SealedEnvelope.seal(tombstone, keys: keys, author: author)
        #expect(envelope.header.isTombstone)
        #expect(try envelope.open(with: keys, members: members) == tombstone)

        for protection in [ProtectionClass.whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly] {
            var local = EnvelopeVector.item
            local.record.protection = protection
            #expect(SyncEligibility(local.record) == .deviceBound)
            #expect(throws: EnvelopeError.self) { try SealedEnvelope.seal(local, keys: keys, author: author) }
        }
        var unsynced = EnvelopeVector.item
        unsynced.record.synchronizable = false
        #expect(SyncEligibility(unsynced.record) == .notSynchronizable)
        #expect(throws: EnvelopeError.self) { try SealedEnvelope.seal(unsynced, keys: keys, author: author) }
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
        let envelope = try SealedEnvelope.seal(EnvelopeVector.item, keys: keys, author: author)
        #expect(try envelope.open(with: opened, members: members) == EnvelopeVector.item)

        #expect(throws: EnvelopeError.self) { try CircleKeys(circle: keys.circle, epoch: 1, circleKey: SymmetricKey(), wrappedClassKeys: wrapped) }
        #expect(throws: EnvelopeError.self) { try CircleKeys(circle: keys.circle, epoch: 2, circleKey: circleKey, wrappedClassKeys: wrapped) }
        #expect(throws: EnvelopeError.self) { try share.open(with: SealingKey(seed: SymmetricKey()), trusting: members) }
        #expect(throws: EnvelopeError.self) { try share.open(with: member, trusting: [SigningKey(seed: SymmetricKey()).publicKey]) }
    }
}
