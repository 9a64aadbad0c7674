import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Synchronization
import Testing

@Suite("Change feed in batches")
struct ChangeFeedTests {
    private struct Stop: Error {}

    /// A device with `count` passwords, every third synchronizable, and one synchronizable
    /// item deleted (a tombstone).
    private func populated(_ count: Int) throws -> TestDevice {
        let t = try TestDevice()
        let keychain = try t.keychain()
        for i in 0..<count { _ = try keychain.add(.password(account: "a\(i)", synchronizable: i % 3 == 0)) }
        var tombstone = ItemQuery.password(account: "a0", synchronizable: .yes)
        tombstone.returning = []
        try keychain.delete(tombstone)
        return t
    }

    @Test("batches carry every change once, in change order, with running counts")
    func batchesMatchTheFeed() throws {
        let t = try populated(25)
        let feed = try t.device.deviceKeychain.changes(since: 0, includingData: true)
        var seen: [ItemChange] = []
        var counts: [(Int, Int)] = []
        try t.device.deviceKeychain.forEachChangeBatch(since: 0, includingData: true, batchSize: 7) { changes in
            changes
        } consume: { changes, done, total in
            seen += changes
            counts.append((done, total))
        }
        #expect(seen.map(\.changeSequence) == feed.map(\.changeSequence))
        #expect(seen.map(\.record.data) == feed.map(\.record.data))
        #expect(seen.filter(\.isTombstone).count == 1)
        #expect(counts.map(\.0) == [7, 14, 21, 25])
        #expect(counts.allSatisfy { $0.1 == 25 })  // the deleted item's row became its tombstone
    }

    @Test("an error in either step ends the read at once and reaches the caller")
    func errorsStopTheRead() throws {
        let t = try populated(40)
        let transformed = Mutex(0)
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachChangeBatch(since: 0, includingData: false, batchSize: 10) { changes in
                let n = transformed.withLock { $0 += 1; return $0 }
                if n == 2 { throw Stop() }
                return changes.count
            } consume: { _, _, _ in }
        }
        #expect(transformed.withLock { $0 } == 2)

        var consumed = 0
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachChangeBatch(since: 0, includingData: false, batchSize: 10) { $0.count } consume: { _, _, _ in
                consumed += 1
                throw Stop()
            }
        }
        #expect(consumed == 1)
    }

    @Test("ParallelMap keeps order for every size and chunking, and the first error wins")
    func parallelMap() throws {
        for count in 0...300 {
            let input = Array(0..<count)
            for minimum in [1, 3, 256] {
                #expect(try ParallelMap.map(input, minimumChunk: minimum) { $0 * 2 } == input.map { $0 * 2 })
            }
        }
        #expect(throws: Stop.self) {
            try ParallelMap.map(Array(0..<2_000), minimumChunk: 1) { i in
                if i == 1_500 { throw Stop() }
                return i
            }
        }
    }
}
