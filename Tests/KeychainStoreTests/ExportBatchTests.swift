import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Synchronization
import Testing

@Suite("Export in batches")
struct ExportBatchTests {
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

    @Test("export batches carry every live item once, whole, in change order, with running counts")
    func batchesMatchTheFeed() throws {
        let t = try populated(25)
        let live = try t.device.deviceKeychain.changes(since: 0, includingData: true).filter { !$0.isTombstone }.map(\.record)
        var seen: [ExportedItem] = []
        var counts: [(Int, Int)] = []
        try t.device.deviceKeychain.forEachExportBatch(batchSize: 7) { items in
            items
        } consume: { items, done, total in
            seen += items
            counts.append((done, total))
        }
        #expect(live.count == 24)
        #expect(seen.map(\.uuid) == live.map(\.uuid))
        for (item, record) in zip(seen, live) {
            #expect(try item.attributes.decoded() == record.attributes)
            #expect(try item.attributes.value(for: .account) == record.attributes[.account])
            #expect(try item.attributes.value(for: .label) == nil)
            #expect(item.data == record.data)
            #expect([item.accessGroup, "\(item.protection)", "\(item.creationDate)"] == [record.accessGroup, "\(record.protection)", "\(record.creationDate)"])
        }
        #expect(counts.map(\.0) == [7, 14, 21, 24])
        #expect(counts.allSatisfy { $0.1 == 24 })
    }

    @Test("an error in either step ends the read at once and reaches the caller")
    func errorsStopTheRead() throws {
        let t = try populated(40)
        let transformed = Mutex(0)
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachExportBatch(batchSize: 10) { items in
                let n = transformed.withLock { $0 += 1; return $0 }
                if n == 2 { throw Stop() }
                return items.count
            } consume: { _, _, _ in }
        }
        #expect(transformed.withLock { $0 } == 2)

        var consumed = 0
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachExportBatch(batchSize: 10) { $0.count } consume: { _, _, _ in
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
