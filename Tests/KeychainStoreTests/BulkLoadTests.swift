import Foundation
import GRDB
import KeychainModel
import KeychainTesting
import Testing

@testable import KeychainStore

/// A restore's bulk load: the item table's unique indexes set aside while its rows go in, kept
/// unique in memory, and built again however the load ends.
@Suite("Bulk load")
struct BulkLoadTests {
    static let group = "\(TestDevice.teamID).\(TestDevice.appID)"

    static func record(_ account: String, uuid: UUID = UUID()) -> ItemRecord {
        let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
        return ItemRecord(
            itemClass: .genericPassword, uuid: uuid, accessGroup: group, protection: .afterFirstUnlock, synchronizable: false,
            accessControl: nil, creationDate: now, modificationDate: now,
            attributes: [.account: .string(account), .service: .string("bulk")], data: Data("\(account)-secret".utf8))
    }

    /// The item table's indexes by name, each unique or not, read on a connection of their own.
    static func itemIndexes(_ fixture: TestDevice) throws -> [String: Bool] {
        let queue = try DatabaseQueue(path: fixture.directory.appendingPathComponent("keychain.db").path)
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "PRAGMA index_list(item)").reduce(into: [:]) { $0[$1["name"] as String] = ($1["unique"] as Int) == 1 }
        }
    }

    /// Two items on the device, then three restored in two sections: one takes the first's UUID,
    /// one the second's primary key, and the last the UUID of one restored before it.
    static func restoreOverlapping(_ fixture: TestDevice, bulk: Bool) throws -> [String: UUID] {
        let keychain = fixture.device.deviceKeychain
        let (x, y) = (record("x"), record("y"))
        try keychain.restore([x, y])
        let q = record("y")
        let sections = [[record("p", uuid: x.uuid), q], [record("r", uuid: q.uuid)]]
        if bulk {
            try keychain.loadingInBulk { load in
                #expect(try itemIndexes(fixture)["item_by_uuid"] == nil, "set aside while the rows go in")
                for section in sections { _ = try keychain.restore(try keychain.sealedForRestore(section), in: load) }
            }
        } else {
            for section in sections { _ = try keychain.restore(try keychain.sealedForRestore(section)) }
        }
        return try keychain.changes(since: 0).filter { !$0.isTombstone }
            .reduce(into: [:]) { result, change in
                if case .string(let account) = change.record.attributes[.account] { result[account] = change.record.uuid }
            }
    }

    @Test("rows that share a UUID or a primary key give way as the indexes would make them, and both unique indexes are back")
    func sameOutcomeAsIndexed() throws {
        let bulk = try TestDevice(seed: 11)
        let indexed = try TestDevice(seed: 11)
        let loaded = try Self.restoreOverlapping(bulk, bulk: true)
        #expect(Set(loaded.keys) == ["p", "r"])
        #expect(Set(try Self.restoreOverlapping(indexed, bulk: false).keys) == Set(loaded.keys))
        let indexes = try Self.itemIndexes(bulk)
        #expect(indexes["item_by_uuid"] == true && indexes["item_by_pk"] == true)
        #expect(try bulk.device.deviceKeychain.availableChanges(since: 0).damaged.isEmpty)
    }

    @Test("a load whose body throws builds the indexes back, and the rows it wrote stay unique")
    func throwingBody() throws {
        struct Stop: Error {}
        let fixture = try TestDevice(seed: 12)
        let keychain = fixture.device.deviceKeychain
        #expect(throws: Stop.self) {
            try keychain.loadingInBulk { load in
                _ = try keychain.restore(try keychain.sealedForRestore([Self.record("a")]), in: load)
                throw Stop()
            }
        }
        let indexes = try Self.itemIndexes(fixture)
        #expect(indexes["item_by_uuid"] == true && indexes["item_by_pk"] == true)
        // The indexed path works again: its upsert compiles only against a unique primary key.
        let again = try keychain.restore([Self.record("a")])
        #expect(again.isEmpty)
        #expect(try keychain.changes(since: 0).filter { !$0.isTombstone }.count == 1)
    }

    @Test("a device whose load was cut short (its process killed) builds its unique indexes at its next power-on")
    func cutShort() throws {
        let fixture = try TestDevice(seed: 13)
        try fixture.device.deviceKeychain.restore([Self.record("a"), Self.record("b")])
        fixture.device.powerOff()
        let queue = try DatabaseQueue(path: fixture.directory.appendingPathComponent("keychain.db").path)
        try queue.write { try $0.execute(sql: "DROP INDEX item_by_uuid; DROP INDEX item_by_pk") }
        try queue.close()
        #expect(try Self.itemIndexes(fixture)["item_by_pk"] == nil)
        let device = try Device.powerOn(at: fixture.directory, clock: fixture.clock)
        defer { device.powerOff() }
        let indexes = try Self.itemIndexes(fixture)
        #expect(indexes["item_by_uuid"] == true && indexes["item_by_pk"] == true)
    }

    @Test("rows whose fingerprints collide are all candidates, and each leaves alone")
    func sharedFingerprints() {
        var holders = BulkLoad.Fingerprints()
        holders.insert(7, 1)
        holders.insert(7, 2)
        holders.insert(7, 3)
        holders.insert(8, 4)
        #expect(Set(holders.ids(7)) == [1, 2, 3] && holders.ids(8) == [4] && holders.ids(9).isEmpty)
        holders.remove(7, 1)
        #expect(Set(holders.ids(7)) == [2, 3])
        holders.remove(7, 3)
        holders.remove(7, 2)
        #expect(holders.ids(7).isEmpty && holders.ids(8) == [4])
    }
}
