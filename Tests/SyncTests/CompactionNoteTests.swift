import Foundation
import KeychainModel
import KeyferryCrypto
import Testing

@testable import SyncWire

/// A compaction note is written by the relay, which members do not trust: read as hostile input.
@Suite("Compaction notes")
struct CompactionNoteTests {
    let author = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()).signingKey.publicKey

    /// A note's bytes with `ranges` as written, whatever they are.
    func note(_ ranges: [(UInt64, UInt64)], count: UInt32? = nil) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array("KFSC".utf8))
        w.uint8(1)
        w.uuid(UUID())
        w.raw(author.bytes)
        w.uint32(count ?? UInt32(ranges.count))
        for (first, last) in ranges {
            w.uint64(first)
            w.uint64(last)
        }
        return w.bytes
    }

    @Test("ranges merge as sequences are added, up to the largest sequence, and read back as written")
    func merging() throws {
        var written = CompactedBatches(circle: UUID(), author: author)
        for sequence: UInt64 in [5, 3, 4, 9, 1, UInt64.max, UInt64.max - 1] { written.insert(sequence...sequence) }
        #expect(written.sequences == [1...1, 3...5, 9...9, (UInt64.max - 1)...UInt64.max])
        #expect(try CompactedBatches(bytes: written.bytes) == written)
        #expect(CompactedBatches.isNote(written.bytes))
    }

    @Test("hostile notes are refused with a reason, never trapped on: ranges out of order, touching, from 0, reversed, too many, cut short")
    func hostile() {
        let cases: [([UInt8], String)] = [
            (note([(5, 6), (1, 2)]), "ascending"),
            (note([(1, 2), (3, 4)]), "ascending and apart"),
            (note([(0, 2)]), "ascending"),
            (note([(4, 2)]), "ascending"),
            (note([(1, UInt64.max), (UInt64.max, UInt64.max)]), "ascending"),
            (note([], count: UInt32(CompactedBatches.maximumRanges + 1)), "ranges"),
            (Array(note([(1, 2)]).dropLast(3)), "truncated"),
            (note([(1, 2)]) + [0], "bytes after"),
        ]
        for (bytes, reason) in cases {
            let error = #expect(throws: EnvelopeError.self) { try CompactedBatches(bytes: bytes) }
            #expect("\(error.map { "\($0)" } ?? "")".contains(reason), "\(String(describing: error))")
        }
    }

    @Test("a member's chain: compacted gaps stop counting as missing, the head stays, sequences at the top of the range do not trap")
    func chains() {
        var chains = AuthorChains()
        let digest = [UInt8](repeating: 1, count: 32)
        chains.receive(BatchLink(sequence: 2, digest: digest), from: author)
        chains.receive(BatchLink(sequence: 9, digest: digest), from: author)
        #expect(chains.chain(of: author)?.missing == [1...1, 3...8])
        chains.compacted([1...1, 4...5], of: author)
        #expect(chains.chain(of: author)?.missing == [3...3, 6...8])
        chains.compacted([3...UInt64.max], of: author)
        #expect(chains.chain(of: author)?.missing == [] && chains.chain(of: author)?.head.sequence == 9)
        chains.receive(BatchLink(sequence: UInt64.max, digest: digest), from: author)
        chains.receive(BatchLink(sequence: UInt64.max, digest: digest), from: author)
        #expect(chains.chain(of: author)?.head.sequence == UInt64.max)
    }

    @Test("a relay's list of forgotten deletions reads back as written, and a list cut mid-entry is refused, not half taken")
    func forgottenDeletions() throws {
        let deletions = [
            ForgottenDeletion(item: UUID(), version: HybridTimestamp(milliseconds: 5, counter: 2)),
            ForgottenDeletion(item: UUID(), version: HybridTimestamp(milliseconds: UInt64.max, counter: UInt32.max)),
        ]
        let bytes = ForgottenDeletion.encode(deletions)
        #expect(bytes.count == 56)
        #expect(try ForgottenDeletion.decode(bytes) == deletions)
        #expect(try ForgottenDeletion.decode([]).isEmpty)
        #expect(throws: (any Error).self) { try ForgottenDeletion.decode(Array(bytes.dropLast(5))) }
    }
}
