import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

/// Devices written by earlier releases, passcode `1234`, each with one generic password per
/// protection class (`user1`…`user7`, secret `secret-CLASS`), a synchronizable `alice`
/// (`synced`), an internet password for `bob` (`inet-pass`), and the tombstone of a deleted
/// synchronizable item (`carol`): `Tests/Fixtures/before-item-keys/device`, in format 1, and
/// `Tests/Fixtures/before-two-tiers/device`, in format 2 (store schema v8).
@Suite("Store format upgrade")
struct FormatUpgradeTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")
    static let app = "com.example.mail"

    /// A copy of a fixture to power on, and the rows' formats and change sequences.
    struct Copy {
        let directory: URL

        init(_ fixture: String) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-upgrade-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: fixtures.appendingPathComponent("\(fixture)/device"), to: directory)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.appendingPathComponent("hardware-uid").path)
        }

        func read<T>(_ body: (Database) throws -> T) throws -> T {
            try DatabaseQueue(path: directory.appendingPathComponent("keychain.db").path).read(body)
        }

        /// `pdmn` of every row in a format before 3 (all of them before the schema has the column).
        func earlierFormatRows() throws -> [String] {
            try read { db in
                let upgraded = try db.columns(in: "item").contains { $0.name == "format" }
                return try String.fetchAll(db, sql: "SELECT pdmn FROM item \(upgraded ? "WHERE format < 3" : "") ORDER BY pdmn")
            }
        }

        /// Each row's change sequence, wrapped item key and secret, by UUID.
        func rows() throws -> [Data: Stored] {
            try read { db in
                let wrappedKey = try db.columns(in: "item").contains { $0.name == "wrapped_key" } ? "wrapped_key" : "NULL"
                return try Row.fetchAll(db, sql: "SELECT uuid, change_seq, \(wrappedKey), secret FROM item").reduce(into: [:]) {
                    $0[$1[0] as Data] = Stored(changeSequence: $1[1], wrappedKey: $1[2], secret: $1[3])
                }
            }
        }

        struct Stored: Equatable {
            var changeSequence: Int64
            var wrappedKey: Data?
            var secret: Data?
        }

        /// The item table's indexes, unique or not, by name.
        func itemIndexes() throws -> [String: Bool] {
            try read { db in
                try Row.fetchAll(db, sql: "PRAGMA index_list(item)").reduce(into: [:]) { $0[$1["name"] as String] = ($1["unique"] as Int) == 1 }
            }
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    static let classes: [(account: String, protection: ProtectionClass)] = [
        ("user1", .whenUnlocked), ("user2", .afterFirstUnlock), ("user3", .always), ("user4", .whenUnlockedThisDeviceOnly),
        ("user5", .afterFirstUnlockThisDeviceOnly), ("user6", .alwaysThisDeviceOnly), ("user7", .whenPasscodeSetThisDeviceOnly),
    ]

    @Test(
        "rows of earlier formats are rewritten in format 3 as their class keys come into memory, keeping their items and change sequences",
        arguments: ["before-item-keys", "before-two-tiers"])
    func upgradeAsKeysArrive(fixture: String) throws {
        let copy = try Copy(fixture)
        defer { copy.remove() }
        let before = try copy.rows()
        #expect(try copy.earlierFormatRows().count == 10, "nine items and a tombstone, none in format 3")

        let device = try Device.powerOn(at: copy.directory, clock: ManualClock())
        defer { device.powerOff() }
        // Before first unlock only class D opens: its two rows are upgraded at power-on.
        #expect(try copy.earlierFormatRows() == ["ak", "ak", "ak", "ak", "akpu", "aku", "ck", "cku"])
        let keychain = try device.keychain(for: Self.app)
        #expect(try keychain.copy(.password(account: "user3", service: "mail")).first?.data == Data("secret-always".utf8))
        // A class A item stays unreadable, attributes included, until the unlock.
        var attributesOnly = ItemQuery.password(account: "user1", service: "mail")
        attributesOnly.returning = .attributes
        let locked = #expect(throws: KeychainError.self) { try keychain.copy(attributesOnly) }
        #expect(locked?.status == .interactionNotAllowed)

        try device.unlock(passcode: "1234")
        #expect(try copy.earlierFormatRows().isEmpty)
        let after = try copy.rows()
        #expect(after.mapValues(\.changeSequence) == before.mapValues(\.changeSequence), "the same rows, the same change sequences: sync sees no change")
        if fixture == "before-two-tiers" {
            #expect(after == before, "format 2 rows keep their item keys and secrets; only their metadata is sealed again")
        }
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

        // Uniqueness is indexes a restore can set aside (schema v8), and only rows of earlier
        // formats are indexed for the upgrade (v9).
        let indexes = try copy.itemIndexes()
        #expect(indexes == ["item_by_uuid": true, "item_by_pk": true, "item_by_change": false, "item_earlier_format": false])

        // Written again after the upgrade, an item is format 3 like every other.
        try keychain.update(.password(account: "user1", service: "mail"), with: ItemChanges(data: Data("new".utf8)))
        #expect(try keychain.copy(.password(account: "user1", service: "mail")).first?.data == Data("new".utf8))
        #expect(try copy.earlierFormatRows().isEmpty)
    }
}
