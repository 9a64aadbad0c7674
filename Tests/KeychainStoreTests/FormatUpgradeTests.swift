import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

/// A device written before item keys (`Tests/Fixtures/before-item-keys/device`, made by the
/// release before format 2, passcode `1234`): one generic password per protection class
/// (`user1`…`user7`, secret `secret-CLASS`), a synchronizable `alice` (`synced`), an internet
/// password for `bob` (`inet-pass`), and the tombstone of a deleted synchronizable item.
@Suite("Store format upgrade")
struct FormatUpgradeTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/before-item-keys/device")
    static let app = "com.example.mail"

    /// A copy of the fixture to power on, and the rows' formats and change sequences.
    struct Copy {
        let directory: URL

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-upgrade-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: FormatUpgradeTests.fixture, to: directory)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.appendingPathComponent("hardware-uid").path)
        }

        /// `pdmn` of every row still in format 1 (all of them before the schema has the column).
        func formatOneRows() throws -> [String] {
            try DatabaseQueue(path: directory.appendingPathComponent("keychain.db").path).read { db in
                let upgraded = try db.columns(in: "item").contains { $0.name == "wrapped_key" }
                return try String.fetchAll(db, sql: "SELECT pdmn FROM item \(upgraded ? "WHERE wrapped_key IS NULL" : "") ORDER BY pdmn")
            }
        }

        func changeSequences() throws -> [Data: Int64] {
            try DatabaseQueue(path: directory.appendingPathComponent("keychain.db").path).read { db in
                try Row.fetchAll(db, sql: "SELECT uuid, change_seq FROM item").reduce(into: [:]) { $0[$1[0] as Data] = $1[1] as Int64 }
            }
        }

        /// The item table's indexes, unique or not, by name.
        func itemIndexes() throws -> [String: Bool] {
            try DatabaseQueue(path: directory.appendingPathComponent("keychain.db").path).read { db in
                try Row.fetchAll(db, sql: "PRAGMA index_list(item)").reduce(into: [:]) { $0[$1["name"] as String] = ($1["unique"] as Int) == 1 }
            }
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    static let classes: [(account: String, protection: ProtectionClass)] = [
        ("user1", .whenUnlocked), ("user2", .afterFirstUnlock), ("user3", .always), ("user4", .whenUnlockedThisDeviceOnly),
        ("user5", .afterFirstUnlockThisDeviceOnly), ("user6", .alwaysThisDeviceOnly), ("user7", .whenPasscodeSetThisDeviceOnly),
    ]

    @Test("rows of format 1 are rewritten in format 2 as their class keys come into memory, keeping their items and change sequences")
    func upgradeAsKeysArrive() throws {
        let copy = try Copy()
        defer { copy.remove() }
        let before = try copy.changeSequences()
        #expect(try copy.formatOneRows().count == 10, "nine items and a tombstone, all format 1")

        let device = try Device.powerOn(at: copy.directory, clock: ManualClock())
        defer { device.powerOff() }
        // Before first unlock only class D opens: its two rows are upgraded at power-on.
        #expect(try copy.formatOneRows() == ["ak", "ak", "ak", "ak", "akpu", "aku", "ck", "cku"])
        let keychain = try device.keychain(for: Self.app)
        #expect(try keychain.copy(.password(account: "user3", service: "mail")).first?.data == Data("secret-always".utf8))

        try device.unlock(passcode: "1234")
        #expect(try copy.formatOneRows().isEmpty)
        #expect(try copy.changeSequences() == before, "the same rows, the same change sequences: sync sees no change")
        for (account, protection) in Self.classes {
            let record = try #require(try keychain.copy(.password(account: account, service: "mail")).first)
            #expect(record.protection == protection && record.data == Data("secret-\(protection.name)".utf8))
        }
        var synced = ItemQuery.password(account: "alice", service: "sync")
        synced.synchronizable = .yes
        #expect(try keychain.copy(synced).first?.data == Data("synced".utf8))
        let inet = ItemQuery(.internetPassword, attributes: [.server: .string("imap.example.com"), .account: .string("bob")], returning: .data)
        #expect(try keychain.copy(inet).first?.data == Data("inet-pass".utf8))
        let tombstones = try device.deviceKeychain.changes(since: 0).filter(\.isTombstone)
        #expect(tombstones.map { $0.record.attributes[.account] } == [.string("carol")], "the tombstone still names its item")

        // The table was rebuilt with its uniqueness as indexes a restore can set aside (schema v8).
        let indexes = try copy.itemIndexes()
        #expect(indexes == ["item_by_uuid": true, "item_by_pk": true, "item_by_change": false, "item_format1": false], "no column constraint's index left")

        // Written again after the upgrade, an item is format 2 like every other.
        try keychain.update(.password(account: "user1", service: "mail"), with: ItemChanges(data: Data("new".utf8)))
        #expect(try keychain.copy(.password(account: "user1", service: "mail")).first?.data == Data("new".utf8))
        #expect(try copy.formatOneRows().isEmpty)
    }
}
