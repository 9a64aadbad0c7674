import Foundation
import KeychainModel
import KeyferryCrypto
import Testing

@testable import SyncWire

@Suite("Circle membership")
struct CircleHistoryTests {
    private let phone = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let tablet = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let laptop = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())

    /// phone creates; phone vouches for tablet; tablet vouches for laptop; laptop removes phone.
    private func history() throws -> CircleHistory {
        var history = CircleHistory(creator: phone, name: "phone")
        try history.append(MembershipEntry(.join, subject: tablet.peer(named: "tablet"), after: history, signer: phone.signingKey))
        try history.append(MembershipEntry(.join, subject: laptop.peer(named: "laptop"), after: history, signer: tablet.signingKey))
        try history.append(MembershipEntry(.remove, subject: phone.peer(named: "phone"), after: history, signer: laptop.signingKey))
        return history
    }

    @Test("a history of creation, vouched joins and a removal verifies whole, from its bytes, on any node")
    func verifies() throws {
        let history = try history()
        #expect(Set(history.members.values.map(\.name)) == ["tablet", "laptop"])
        #expect(!history.isMember(phone.signingKey.publicKey) && history.isMember(laptop.signingKey.publicKey))
        #expect(history.epoch == 2, "the removal starts a new key generation")
        let received = try CircleHistory(verifying: history.entries.map { try MembershipEntry(bytes: $0.bytes) })
        #expect(received == history)
    }

    @Test("only members vouch and remove: a stranger, a removed member or a repeated join is refused")
    func onlyMembers() throws {
        var history = try history()
        let before = history
        let circle = history.circle
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: stranger.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: phone.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: tablet.peer(named: "again"), after: history, signer: laptop.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.remove, subject: phone.peer(named: "phone"), after: history, signer: laptop.signingKey))
        }
        #expect(throws: CircleError.self) {
            let create = MembershipEntry.creating(stranger, name: "x")
            try history.append(
                MembershipEntry(
                    .create, circle: circle, sequence: UInt32(history.entries.count), previous: create.previous,
                    subject: stranger.peer(named: "x"), signer: stranger.signingKey))
        }
        #expect(history == before, "refused entries leave it as it was")
    }

    @Test("an edited byte, a dropped or reordered entry, or an entry from another circle is refused")
    func tampering() throws {
        let entries = try history().entries
        for (index, entry) in entries.enumerated() {
            let bytes = entry.bytes
            for position in stride(from: 0, to: bytes.count, by: 7) {
                var edited = bytes
                edited[position] ^= 0x01
                var forged = entries
                guard let read = try? MembershipEntry(bytes: edited) else { continue }
                forged[index] = read
                #expect(throws: CircleError.self) { try CircleHistory(verifying: forged) }
            }
        }
        #expect(throws: CircleError.self) { try CircleHistory(verifying: Array(entries.dropFirst())) }
        #expect(throws: CircleError.self) { try CircleHistory(verifying: [entries[0], entries[2], entries[1]]) }
        #expect(throws: CircleError.self) { try CircleHistory(verifying: [entries[0], entries[2]]) }
        #expect(throws: CircleError.self) { try CircleHistory(verifying: []) }
        let other = CircleHistory(creator: phone, name: "phone")
        #expect(throws: CircleError.self) { try CircleHistory(verifying: [other.entries[0]] + entries.dropFirst()) }
        #expect(throws: CircleError.self) { try MembershipEntry(bytes: Array(entries[1].bytes.dropLast())) }
    }

    @Test("a circle's id is made by its creator's key: nobody else can make a first entry for a circle that exists")
    func circleIDs() throws {
        let real = CircleHistory(creator: phone, name: "phone")
        let nonce = real.entries[0].previous
        #expect(real.circle == CircleHistory.circleID(creator: phone.signingKey.publicKey, nonce: nonce))
        #expect(real.circle != CircleHistory(creator: phone, name: "phone").circle, "a new circle, a new id")
        // The stranger copies the id and the random bytes; its key makes another id.
        let forged = MembershipEntry(
            .create, circle: real.circle, sequence: 0, previous: nonce, subject: stranger.peer(named: "phone"),
            signer: stranger.signingKey)
        #expect(throws: CircleError.self) { try CircleHistory(verifying: [forged]) }
        let reread = try CircleHistory.reading(real.entries.map(\.bytes), circle: real.circle)
        #expect(reread.history == real && reread.refused.isEmpty)
        #expect(throws: CircleError.self) { try CircleHistory.reading([forged.bytes], circle: real.circle) }
        #expect(throws: CircleError.self) { try CircleHistory.reading(real.entries.map(\.bytes), circle: UUID()) }
    }

    @Test("a log read from a relay passes over what does not extend the history, says why, and takes what follows")
    func passesOverJunk() throws {
        let full = try history()
        var history = try CircleHistory(verifying: [full.entries[0]])
        let junk: [[UInt8]] = [
            [MembershipEntry.formatVersion, 1, 2, 3],
            MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, signer: stranger.signingKey).bytes,
            MembershipEntry(
                .join, circle: full.circle, sequence: 1000, previous: ContentDigest.of(full.entries[0].bytes),
                subject: stranger.peer(named: "x"), signer: phone.signingKey
            ).bytes,
        ]
        let refused = history.extend(with: [junk[0], full.entries[1].bytes, junk[1], junk[2]] + full.entries.dropFirst(2).map(\.bytes))
        #expect(history == full, "the real entries are all taken")
        #expect(refused.count == 2, "the malformed one and the one out of place: \(refused)")
        #expect(refused.allSatisfy { $0.reason == .invalidHistory })
        #expect(refused.contains { $0.detail.contains("truncated or malformed") } && refused.contains { $0.detail.contains("out of place") })
        // The stranger's join was at a place the real entry had taken: passed over in silence.
        #expect(history.extend(with: full.entries.map(\.bytes)).isEmpty, "entries read before are passed over in silence")
    }
}
