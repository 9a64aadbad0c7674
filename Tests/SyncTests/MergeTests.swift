import Foundation
import KeychainModel
import KeychainTesting
import SyncWire
import Testing

@Suite("Versions and merge")
struct MergeTests {
    private func version(_ ms: UInt64, _ counter: UInt32 = 0, tombstone: Bool = false, secret: String = "s") -> SyncedItem {
        SyncedItem(
            version: HybridTimestamp(milliseconds: ms, counter: counter), isTombstone: tombstone,
            record: ItemRecord(
                itemClass: .genericPassword, uuid: UUID(uuidString: "11111111-2222-4333-8444-555555555555")!,
                accessGroup: "g", protection: .afterFirstUnlock, synchronizable: true, accessControl: nil,
                creationDate: Date(timeIntervalSinceReferenceDate: 0), modificationDate: Date(timeIntervalSinceReferenceDate: Double(ms) / 1000),
                attributes: [.account: .string("a")], data: tombstone ? nil : Data(secret.utf8)))
    }

    @Test("a change is stamped after everything seen before it, with the time it was made when that is later, whatever the wall clocks say")
    func hybridClock() {
        var clock = HybridClock()
        let first = clock.stamp(changeAt: 1, wallMilliseconds: 5_000)
        let sameMillisecond = clock.stamp(changeAt: 2, wallMilliseconds: 5_000)
        let wallWentBack = clock.stamp(changeAt: 3, wallMilliseconds: 4_000)
        #expect(first < sameMillisecond && sameMillisecond < wallWentBack)
        #expect(wallWentBack == HybridTimestamp(milliseconds: 5_000, counter: 2))
        #expect(clock.stamp(changeAt: 4, wallMilliseconds: 6_000) == HybridTimestamp(milliseconds: 6_000))

        // Node B's clock is an hour behind A's. B sees A's write, then edits the item.
        var a = HybridClock()
        var b = HybridClock()
        let written = a.stamp(changeAt: 1, wallMilliseconds: 10_000_000)
        b.observe(written, at: 10)
        let edited = b.stamp(changeAt: 11, wallMilliseconds: 10_000_000 - 3_600_000)
        #expect(edited > written)
        #expect(MergeRule.prefers(version(edited.milliseconds, edited.counter, secret: "b"), over: version(written.milliseconds, written.counter)))

        // A change B made before it saw A's write, stamped only now (it waited for an unlock),
        // keeps its own, earlier time: the later write wins.
        let madeBefore = b.stamp(changeAt: 9, wallMilliseconds: 9_000_000)
        #expect(madeBefore == HybridTimestamp(milliseconds: 9_000_000) && madeBefore < written)
        #expect(b.stamp(changeAt: 12, wallMilliseconds: 1) > edited, "the readings still order what comes after")

        // Forgetting what came before the stamped changes keeps what later ones are stamped after.
        b.forget(through: 12)
        #expect(b.readings.count == 1 && b.reading(before: 13) == b.latest)

        var full = HybridClock(readings: [.init(sequence: 1, time: HybridTimestamp(milliseconds: 7, counter: .max))])
        #expect(full.stamp(changeAt: 2, wallMilliseconds: 1) == HybridTimestamp(milliseconds: 8))
        #expect(HybridTimestamp(milliseconds: .max, counter: .max).successor == HybridTimestamp(milliseconds: .max, counter: .max))
    }

    @Test("the newer version wins; on a tie the smaller digest wins, from either side; a delete is a version like any other")
    func rule() {
        let old = version(1_000)
        let new = version(2_000, secret: "t")
        #expect(MergeRule.prefers(new, over: old) && !MergeRule.prefers(old, over: new))
        let x = version(3_000, secret: "x")
        let y = version(3_000, secret: "y")
        let smaller = x.digest.lexicographicallyPrecedes(y.digest) ? x : y
        let larger = smaller == x ? y : x
        #expect(MergeRule.prefers(smaller, over: larger) && !MergeRule.prefers(larger, over: smaller))
        #expect(!MergeRule.prefers(x, over: x), "the same version is no change")
        let delete = version(3_000, tombstone: true)
        #expect(MergeRule.prefers(delete, over: x) == delete.digest.lexicographicallyPrecedes(x.digest))
        #expect(MergeRule.prefers(version(3_001, tombstone: true), over: x) && !MergeRule.prefers(x, over: version(3_001, tombstone: true)))
    }

    @Test("replicas that receive the same versions in any order, each more than once, keep the same one", arguments: 0..<20)
    func convergence(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        // Few distinct timestamps, so ties are common; deletes among the updates.
        let versions = (0..<12).map { i in
            version(
                UInt64.random(in: 1...4, using: &random), UInt32.random(in: 0...1, using: &random),
                tombstone: Bool.random(using: &random), secret: "v\(i)")
        }
        var kept: [SyncedItem] = []
        for _ in 0..<3 {
            var deliveries = (versions + versions.shuffled(using: &random).prefix(5)).shuffled(using: &random)
            var current = deliveries.removeFirst()
            for candidate in deliveries where MergeRule.prefers(candidate, over: current) { current = candidate }
            kept.append(current)
        }
        // The reference: the greatest version, ties to the smaller digest.
        let expected = versions.max { a, b in a.version != b.version ? a.version < b.version : b.digest.lexicographicallyPrecedes(a.digest) }
        #expect(kept.allSatisfy { $0 == expected })
    }

    @Test("a payload round-trips, and a bad one is refused")
    func payloadCoding() throws {
        let item = version(1_234, 5, secret: "payload")
        #expect(try SyncedItem(decoding: item.encoded) == item)
        var bytes = item.encoded
        bytes[0] = 9
        #expect(throws: (any Error).self) { try SyncedItem(decoding: bytes) }
        #expect(throws: (any Error).self) { try SyncedItem(decoding: Array(item.encoded.dropLast())) }
    }
}
