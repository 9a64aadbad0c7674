import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

@Suite("Versions sync holds")
struct ReplicaVersionTests {
    /// A version of `record` as another member wrote it: a new UUID, `account` and `version`.
    private func replicated(_ record: ItemRecord, account: String, version: [UInt8]) -> Keychain.ReplicatedVersion {
        var record = record
        record.uuid = UUID()
        record.attributes[.account] = .string(account)
        return Keychain.ReplicatedVersion(record: record, tombstoneDate: nil, version: version)
    }

    /// A test device holding one synchronizable password of its own, and that item.
    private func deviceWithOneItem() throws -> (TestDevice, ItemRecord) {
        let t = try TestDevice()
        _ = try t.keychain().add(.password(account: "local", synchronizable: true))
        return (t, try #require(try t.device.deviceKeychain.changes(since: 0, includingData: true).first?.record))
    }

    @Test("a replicated write keeps its version in the same transaction; the push feed leaves it out, unopened, and reads past it")
    func writtenWithTheItem() throws {
        let (t, local) = try deviceWithOneItem()
        let keychain = t.device.deviceKeychain

        let received = replicated(local, account: "received", version: [1, 2, 3])
        let outcomes = try keychain.applyReplicated([received]) { _, _ in
            Issue.record("no item holds its primary key")
            return true
        }
        guard case .written(let sequence) = try #require(outcomes.first) else {
            Issue.record("not written: \(outcomes)")
            return
        }
        #expect(
            try keychain.replicaVersions(of: [received.record.uuid, local.uuid]) == [received.record.uuid: .init(version: [1, 2, 3], changeSequence: sequence)])

        let page = try keychain.changesToPush(since: 0, limit: 10)
        #expect(page.open.map(\.change.record.uuid) == [local.uuid])
        #expect(page.through == sequence)
        #expect(try keychain.changesToPush(since: page.through, limit: 10).through == page.through)
    }

    @Test("a version under a primary key another item holds is asked about with the holder's version; the holder's goes with it")
    func conflictsSeeTheHoldersVersion() throws {
        let (t, local) = try deviceWithOneItem()
        let keychain = t.device.deviceKeychain
        let first = replicated(local, account: "shared", version: [1])
        _ = try keychain.applyReplicated([first]) { _, _ in true }

        // Refused: the holder and its version stay.
        var asked: [Keychain.ReplicaVersion?] = []
        let refused = try keychain.applyReplicated([replicated(local, account: "shared", version: [2])]) { _, holder in
            asked.append(holder)
            return false
        }
        #expect(refused == [.superseded])
        #expect(asked.map { $0?.version } == [[1]])
        #expect(try keychain.replicaVersions(of: [first.record.uuid]).count == 1)

        // Taken: the holder's version goes with it.
        let second = replicated(local, account: "shared", version: [3])
        _ = try keychain.applyReplicated([second]) { _, _ in true }
        #expect(try keychain.replicaVersions(of: [first.record.uuid, second.record.uuid]).mapValues(\.version) == [second.record.uuid: [3]])

        // A local item holding the key has no version: the question says so.
        asked = []
        _ = try keychain.applyReplicated([replicated(local, account: "local", version: [4])]) { _, holder in
            asked.append(holder)
            return true
        }
        #expect(asked == [nil])

        try keychain.forgetReplicaVersions()
        #expect(try keychain.replicaVersions(of: [second.record.uuid]).isEmpty)
    }

    @Test(
        "a version that comes sealed keeps its secret as it came, its key re-wrapped and its metadata under the class's metadata key (as it opened, or with the primary key's defaults it lacked); the push feed hands out a row's own secret and key, the same bytes on every push"
    )
    func sealedVersionsKeepTheirCiphertexts() throws {
        let (t, local) = try deviceWithOneItem()
        let keychain = t.device.deviceKeychain
        func opened(_ seal: ItemSeal, _ record: ItemRecord) throws -> ItemSeal.Opened {
            try seal.opened(uuid: record.uuid, itemClass: record.itemClass, protection: record.protection, synchronizable: true)
        }
        var item = replicated(local, account: "sealed", version: [5])
        item.record.data = Data("sent-secret".utf8)
        let seal = ItemSeal.sealing(item.record)
        item.record.data = nil
        item.sealed = try opened(seal, item.record)
        #expect(item.sealed?.storableMetadata != nil, "every primary-key attribute is there: the metadata is stored as it opened")
        var bare = replicated(local, account: "bare", version: [7])
        bare.record.attributes[.service] = nil
        bare.record.data = Data("bare-secret".utf8)
        let bareSeal = ItemSeal.sealing(bare.record)
        bare.record.data = nil
        bare.sealed = try opened(bareSeal, bare.record)
        #expect(bare.sealed?.storableMetadata == nil, "a primary-key attribute is missing: the metadata is written again, with its default")
        var tombstone = replicated(local, account: "buried", version: [6])
        tombstone.sealed = try opened(ItemSeal.sealing(tombstone.record, isTombstone: true), tombstone.record)
        tombstone.tombstoneDate = Date()
        _ = try keychain.applyReplicated([item, bare, tombstone]) { _, _ in true }
        let bareRead = try t.keychain().copy(
            ItemQuery(.genericPassword, attributes: [.account: .string("bare")], synchronizable: .yes, returning: [.data, .attributes]))
        #expect(bareRead.first?.data == Data("bare-secret".utf8))
        #expect(bareRead.first?.attributes[.service] == .string(""))

        let rows = try DatabaseQueue(path: t.directory.appendingPathComponent("keychain.db").path).read { db in
            try Row.fetchAll(db, sql: "SELECT uuid, metadata, secret FROM item ORDER BY id")
        }
        let stored = try #require(rows.first { ($0["uuid"] as Data) == Data(item.record.uuid.bytes) })
        #expect(stored["secret"] as Data == seal.secret)
        #expect(stored["metadata"] as Data != seal.metadata, "sealed under this device's metadata key, not the item key")
        let buried = try #require(rows.first { ($0["uuid"] as Data) == Data(tombstone.record.uuid.bytes) })
        #expect(buried["secret"] as Data? == nil)
        let read = try t.keychain().copy(ItemQuery(.genericPassword, attributes: [.account: .string("sealed")], synchronizable: .yes, returning: [.data]))
        #expect(read.first?.data == Data("sent-secret".utf8))

        let pushed = try #require(try keychain.changesToPush(since: 0, limit: 10).open.first)
        let own = try #require(rows.first { ($0["uuid"] as Data) == Data(local.uuid.bytes) })
        #expect(pushed.change.record.data == nil)
        #expect(pushed.seal.secret == own["secret"] as Data)
        let opened = try pushed.seal.opened(uuid: local.uuid, itemClass: .genericPassword, protection: local.protection, synchronizable: true)
        #expect(opened.record.attributes == local.attributes)
        let again = try #require(try keychain.changesToPush(since: 0, limit: 10).open.first)
        #expect(again.seal.metadata == pushed.seal.metadata && again.seal.secret == pushed.seal.secret)
    }

    @Test("a fork of the device (what survival paths start from) is in no circle: it holds no versions, the device keeps its own")
    func forkLeavesThemBehind() throws {
        let (t, local) = try deviceWithOneItem()
        let keychain = t.device.deviceKeychain
        let received = replicated(local, account: "received", version: [7])
        _ = try keychain.applyReplicated([received]) { _, _ in true }

        let directory = t.device.directory.deletingLastPathComponent().appendingPathComponent("fork-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let fork = try t.device.fork(to: directory)
        defer { fork.powerOff() }
        #expect(try fork.deviceKeychain.replicaVersions(of: [received.record.uuid]).isEmpty)
        #expect(try fork.deviceKeychain.changes(since: 0).count == 2)
        #expect(try keychain.replicaVersions(of: [received.record.uuid]).count == 1)
    }
}
