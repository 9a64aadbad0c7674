import Foundation
import KeyferryCrypto
import Sync
import Testing

@Suite("Circle membership")
struct CircleHistoryTests {
    private let phone = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let tablet = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let laptop = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
    private let stranger = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())

    /// phone creates; phone vouches for tablet; tablet vouches for laptop; laptop removes phone.
    private func history() throws -> CircleHistory {
        var history = CircleHistory(creator: phone, name: "phone")
        try history.append(MembershipEntry(.join, subject: tablet.peer(named: "tablet"), after: history, circle: history.circle, signer: phone.signingKey))
        try history.append(MembershipEntry(.join, subject: laptop.peer(named: "laptop"), after: history, circle: history.circle, signer: tablet.signingKey))
        try history.append(MembershipEntry(.remove, subject: phone.peer(named: "phone"), after: history, circle: history.circle, signer: laptop.signingKey))
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
        let before = history, circle = history.circle
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, circle: circle, signer: stranger.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: stranger.peer(named: "x"), after: history, circle: circle, signer: phone.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.join, subject: tablet.peer(named: "again"), after: history, circle: circle, signer: laptop.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.remove, subject: phone.peer(named: "phone"), after: history, circle: circle, signer: laptop.signingKey))
        }
        #expect(throws: CircleError.self) {
            try history.append(MembershipEntry(.create, subject: stranger.peer(named: "x"), after: history, circle: circle, signer: stranger.signingKey))
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
}

