import Foundation
import KeychainModel
import KeychainTesting
import Testing

@testable import KeychainStore

/// One damaged row hides only itself: reads of many items return the rest and name it, as
/// Apple's keychain server returns what it can; a read of it alone still fails.
@Suite("Damaged rows")
struct DamagedRowTests {
    /// A device with three items, `second`'s attributes altered on disk, powered on again.
    struct Setup {
        let fixture: TestDevice
        let device: Device
        let damaged: UUID

        init() throws {
            fixture = try TestDevice()
            let keychain = try fixture.keychain()
            for account in ["first", "second", "third"] { try keychain.add(.password(account: account, value: "\(account)-secret")) }
            let uuid = try #require(try keychain.copy(.password(account: "second")).first?.uuid)
            damaged = uuid
            fixture.device.powerOff()
            try fixture.damageAttributes(of: uuid)
            device = try Device.powerOn(at: fixture.directory, clock: fixture.clock)
            try device.unlock(passcode: TestDevice.defaultPasscode)
        }
    }

    @Test("a list returns the other items and names the damaged one")
    func list() throws {
        let setup = try Setup()
        let listing = try setup.device.deviceKeychain.list()
        #expect(listing.items.map { $0.attributes[.account] } == [.string("first"), .string("third")])
        #expect(listing.damaged.map(\.uuid) == [setup.damaged])
        #expect(listing.damaged.first?.description.contains("cannot be opened") == true)
        #expect(try setup.device.keychain(for: TestDevice.appID).list().damaged.map(\.uuid) == [setup.damaged])
    }

    @Test("a search for all passes over it and names it; a search for it alone is errSecDecode; a search for one finds the next")
    func searches() throws {
        let setup = try Setup()
        let keychain = try setup.device.keychain(for: TestDevice.appID)
        var all = ItemQuery(.genericPassword, matchLimit: .all, returning: .data)
        var damaged: [DamagedItem] = []
        let found = try keychain.copy(all, damaged: &damaged)
        #expect(found.compactMap(\.data) == [Data("first-secret".utf8), Data("third-secret".utf8)])
        #expect(damaged.map(\.uuid) == [setup.damaged])
        #expect {
            try keychain.copy(.password(account: "second"))
        } throws: { ($0 as? KeychainError)?.status == .decode }
        // The first match after `first` is damaged: a search for one reads on to `third`.
        all.matchLimit = .one
        all.attributes[.service] = .string("com.example.app")
        var first = ItemQuery.password(account: "first")
        first.returning = []
        try keychain.delete(first)
        #expect(try keychain.copy(all).first?.data == Data("third-secret".utf8))
    }

    @Test("the change feed sets it apart; an export leaves it out and returns it")
    func feeds() throws {
        let setup = try Setup()
        let feed = try setup.device.deviceKeychain.availableChanges(since: 0)
        #expect(feed.open.count == 2 && feed.damaged.map(\.uuid) == [setup.damaged])
        // What sync pushes: the rest, the damaged one named for the report.
        let page = try setup.device.deviceKeychain.changesToPush(since: 0, limit: 100)
        #expect(page.open.count == 2 && page.damaged.map(\.uuid) == [setup.damaged])
        #expect(try setup.device.deviceKeychain.changes(since: 0).count == 2)
        var exported: [UUID] = []
        let leftOut = try setup.device.deviceKeychain.forEachExportBatch(secrets: .opened) { items in
            items.map(\.uuid)
        } consume: { pieces, _, _ in
            exported += pieces.joined()
        }
        #expect(exported.count == 2 && !exported.contains(setup.damaged))
        #expect(leftOut.map(\.uuid) == [setup.damaged])
    }

    @Test("a restored item that does not read back is not written, and is returned")
    func restoreReadsBack() throws {
        let fixture = try TestDevice(seed: 5)
        let now = Date()
        let records = ["kept", "altered"].map { account in
            ItemRecord(
                itemClass: .genericPassword, uuid: UUID(), accessGroup: "\(TestDevice.teamID).\(TestDevice.appID)", protection: .afterFirstUnlock,
                synchronizable: false, accessControl: nil, creationDate: now, modificationDate: now,
                attributes: [.account: .string(account), .service: .string("restored")], data: Data("\(account)-secret".utf8))
        }
        let keychain = fixture.device.deviceKeychain
        var sealed = try keychain.sealedForRestore(records)
        // What a faulty codec would write: a sealed row that no longer opens as it is stored.
        let index = try #require(sealed.rows.firstIndex { $0.header.uuid == records[1].uuid })
        sealed.rows[index].metadata[4] ^= 0x01
        let unreadable = try keychain.restore(sealed)
        #expect(unreadable.map(\.uuid) == [records[1].uuid])
        let stored = try keychain.changes(since: 0, includingData: true).map(\.record)
        #expect(stored.map(\.uuid) == [records[0].uuid])
        #expect(try keychain.availableChanges(since: 0).damaged.isEmpty, "nothing unreadable was left in the store")
    }
}
