import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryThreads
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
        try t.device.deviceKeychain.forEachExportBatch(batchSize: 7, secrets: .opened) { items in
            items
        } consume: { pieces, done, total in
            seen += pieces.flatMap { $0 }
            counts.append((done, total))
        }
        #expect(live.count == 24)
        #expect(seen.map(\.uuid) == live.map(\.uuid))
        for (item, record) in zip(seen, live) {
            #expect(try item.attributes.decoded() == record.attributes)
            let picked = try item.attributes.values(of: AttributeSelection([.account, .label]))
            #expect(picked[.account] == record.attributes[.account])
            #expect(picked[.label] == nil)
            #expect(item.data == record.data)
            #expect(
                [item.accessGroup, "\(item.protection)", "\(item.creationDate)"] == [record.accessGroup, "\(record.protection)", "\(record.creationDate)"])
        }
        #expect(counts.map(\.0) == [7, 14, 21, 24])
        #expect(counts.allSatisfy { $0.1 == 24 })
    }

    @Test("an error in either step ends the read at once and reaches the caller")
    func errorsStopTheRead() throws {
        let t = try populated(40)
        let transformed = Locked(0)
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachExportBatch(batchSize: 10, secrets: .opened) { items in
                let n = transformed.withLock {
                    $0 += 1
                    return $0
                }
                if n == 2 { throw Stop() }
                return items.count
            } consume: { _, _, _ in
            }
        }
        #expect(transformed.withLock { $0 } == 2)

        var consumed = 0
        #expect(throws: Stop.self) {
            try t.device.deviceKeychain.forEachExportBatch(batchSize: 10, secrets: .opened) {
                $0.count
            } consume: { _, _, _ in
                consumed += 1
                throw Stop()
            }
        }
        #expect(consumed == 1)
    }

    @Test("while locked, the whole change feed fails with -25308; the available feed opens class C and names the class A rows it cannot")
    func changeFeedWhileLocked() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "a", protection: .whenUnlocked))
        try keychain.add(.password(account: "c", protection: .afterFirstUnlock))
        try t.device.lock(immediately: true)
        #expect(status { _ = try t.device.deviceKeychain.changes(since: 0) } == .interactionNotAllowed)
        let feed = try t.device.deviceKeychain.availableChanges(since: 0, includingData: true)
        #expect(feed.open.map { $0.record.attributes[.account] } == [.string("c")] && feed.open.first?.record.data == Data("secret".utf8))
        #expect(feed.sealed.map(\.protection) == [.whenUnlocked])
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try t.device.deviceKeychain.changes(since: 0).count == 2)
    }

    @Test("a large batch is handed to transform in consecutive pieces, one per call, in order")
    func batchesInPieces() throws {
        let t = try populated(1_201)
        var batches: [[[UUID]]] = []
        try t.device.deviceKeychain.forEachExportBatch(batchSize: 600, secrets: .opened) { items in
            items.map(\.uuid)
        } consume: { pieces, _, _ in
            batches.append(pieces)
        }
        let live = try t.device.deviceKeychain.changes(since: 0).filter { !$0.isTombstone }.map(\.record.uuid)
        #expect(batches.flatMap { $0.flatMap { $0 } } == live)
        #expect(batches.map { $0.map(\.count).reduce(0, +) } == [600, 600])
        if ProcessInfo.processInfo.activeProcessorCount > 1 {
            #expect(batches.allSatisfy { $0.count > 1 }, "600 rows are enough to share between cores")
        }
    }

    @Test("ParallelMap keeps order for every size and chunking, and the first error wins")
    func parallelMap() throws {
        for count in 0...300 {
            let input = Array(0..<count)
            for minimum in [1, 3, 256] {
                #expect(try ParallelMap.map(input, minimumChunk: minimum) { $0 * 2 } == input.map { $0 * 2 })
                let pieces = try ParallelMap.mapChunks(input, minimumChunk: minimum) { Array($0) }
                #expect(pieces.flatMap { $0 } == input)
                #expect(pieces.dropLast().allSatisfy { $0.count >= minimum })
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
