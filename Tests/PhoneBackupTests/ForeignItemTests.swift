import AppleFormats
import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

@testable import PhoneBackup

/// Keychain items as other writers put them in a backup: sealed by the rules of the format
/// (so they open), with attributes Keyferry's own writer never chooses.
@Suite("Keychain items Keyferry did not write")
struct ForeignItemTests {
    /// An encrypted backup of the usual source, and a powered-off new device to restore onto.
    struct Setup {
        let source: TestDevice
        let folder: URL
        let target: TestDevice

        init() throws {
            source = try PhoneBackupTests.source()
            folder = try PhoneBackupTests.write(source)
            target = try TestDevice(seed: 9, apps: [])
            target.device.powerOff()
        }

        /// Adds items to `keychain-backup.plist`'s `genp` table, each sealed under the backup's
        /// own class key 7 (afterFirstUnlock) as a phone seals them.
        func plant(_ items: [[String: PropertyList]], table: String = "genp", keychainClass: UInt32 = 7) throws {
            let opened = try PhoneBackupReader(folder: folder).open(password: PhoneBackupTests.password, device: nil)
            let row = try #require(opened.rows.first { $0.domain == PhoneDomain.keychain && $0.relativePath == PhoneDomain.keychainFile })
            let fileKey = try #require(row.file.encryptionKey)
            let key = try fileKey.unwrap(with: try #require(opened.classKeys[fileKey.protectionClass]))
            var plist = try KeychainBackupPlist(propertyList: try BinaryPropertyList.decode(try opened.contents(of: row)))
            let classKey = try #require(opened.classKeys[keychainClass])
            for (index, attributes) in items.enumerated() {
                let sealed = try SealedKeychainItem(
                    sealing: Array(try DERPropertyList.encode(.dictionary(attributes))), protectionClass: keychainClass, classKey: classKey)
                plist.entries[table, default: []].append(
                    .init(data: Data(sealed.bytes), persistentReference: KeychainBackupPlist.persistentReference(table: table, row: UInt64(1000 + index))))
            }
            try BackupFileCrypto.seal(BinaryPropertyList.encode(plist.propertyList), key: key).write(to: try opened.folder.blob(row.fileID))
        }

        func restore() throws -> RestoreReport {
            try PhoneRestore.restore(folder, password: PhoneBackupTests.password, to: target.directory, passcode: TestDevice.defaultPasscode)
        }

        /// Every live item on the target, with its secret, read through the store.
        func items() throws -> [ItemRecord] {
            let device = try Device.powerOn(at: target.directory)
            defer { device.powerOff() }
            try device.unlock(passcode: TestDevice.defaultPasscode)
            return try device.deviceKeychain.changes(since: 0, includingData: true).filter { !$0.isTombstone }.map(\.record)
        }
    }

    /// A generic password as a phone's keychain exports it: the engine's attributes, no `UUID`.
    static func password(account: String, group: String = "ABCDE12345.com.example.mail", secret: String) -> [String: PropertyList] {
        [
            "acct": .string(account), "svce": .string("foreign"), "agrp": .string(group), "pdmn": .string("ck"), "sync": .integer(0),
            "cdat": .date(Date(timeIntervalSinceReferenceDate: 700_000_000)), "mdat": .date(Date(timeIntervalSinceReferenceDate: 700_000_100)),
            "v_Data": .data(Data(secret.utf8)), "tomb": .integer(0), "musr": .data(Data()),
        ]
    }

    @Test("items without a UUID, or with a version 1 or 5 one, restore readable, under the UUID the report gives")
    func uuidVersions() throws {
        let setup = try Setup()
        var versionOne = Self.password(account: "v1", secret: "one")
        versionOne["UUID"] = .string("C232AB00-9414-11EC-B3C8-9F6BDECED846")
        var versionFive = Self.password(account: "v5", secret: "five")
        versionFive["UUID"] = .string("886313E1-3B8A-5372-9B90-0C9AEE199E5D")
        try setup.plant([Self.password(account: "none", secret: "no uuid"), versionOne, versionFive])
        let report = try setup.restore()
        let planted = report.items.filter { ["none", "v1", "v5"].contains($0.name?.split(separator: " ").first.map(String.init)) }
        #expect(planted.count == 3)
        #expect(planted.allSatisfy { $0.restored })
        let stored = try setup.items()
        for outcome in planted {
            let item = try #require(stored.first { $0.uuid == outcome.uuid }, "\(outcome.name ?? "") is not in the store under its reported UUID")
            #expect(item.data != nil)
        }
        let secrets = Set(stored.compactMap { $0.data.map { String(decoding: $0, as: UTF8.self) } })
        #expect(secrets.isSuperset(of: ["no uuid", "one", "five"]))
        #expect(stored.contains { $0.uuid.uuidString == "C232AB00-9414-11EC-B3C8-9F6BDECED846" })
        #expect(stored.contains { $0.uuid.uuidString == "886313E1-3B8A-5372-9B90-0C9AEE199E5D" })
    }

    @Test("items claiming Keyferry's own groups are refused and reported, and the device's own items stay as they were")
    func reservedGroups() throws {
        let setup = try Setup()
        // The target's sync identity, as the device keeps it.
        let device = try Device.powerOn(at: setup.target.directory)
        try device.unlock(passcode: TestDevice.defaultPasscode)
        var identity = NewItem.password(account: "signing", value: "the device's own seed", protection: .afterFirstUnlockThisDeviceOnly)
        identity.accessGroup = Device.ownAccessGroup
        try device.deviceKeychain.add(identity)
        device.powerOff()
        let own = { try setup.items().filter { $0.accessGroup.hasPrefix("com.keyferry.") } }
        let before = try own()
        #expect(before.count == 1)

        var signing = Self.password(account: "signing", group: Device.ownAccessGroup, secret: "a seed the writer chose")
        signing["svce"] = .string("keyferry.sync.identity")
        var sealing = signing
        sealing["acct"] = .string("sealing")
        var other = Self.password(account: "x", group: "com.keyferry.anything", secret: "planted")
        other["UUID"] = .string(UUID().uuidString)
        try setup.plant([signing, sealing, other])
        let report = try setup.restore()
        let refused = report.items.filter { $0.reason == .reservedGroup }
        #expect(refused.count == 3)
        #expect(!refused.contains { $0.restored })
        #expect(try own().map(\.data) == before.map(\.data))
        #expect(try own().map(\.uuid) == before.map(\.uuid))
    }

    @Test("the store refuses a restored row in Keyferry's own group, whatever path brings it")
    func storeRefusesReservedGroups() throws {
        let fixture = try TestDevice(seed: 3)
        let record = ItemRecord(
            itemClass: .genericPassword, uuid: UUID(), accessGroup: Device.ownAccessGroup, protection: .afterFirstUnlock, synchronizable: false,
            accessControl: nil, creationDate: Date(), modificationDate: Date(), attributes: [.account: .string("signing")], data: Data("x".utf8))
        #expect(throws: KeychainError.self) { try fixture.device.deviceKeychain.restore([record]) }
    }

    @Test("a restore with the gate passed lists the local items it removes")
    func localItemsListed() throws {
        let source = try PhoneBackupTests.source()
        let folder = try PhoneBackupTests.write(source, encrypted: false)
        try source.keychain().add(.password(account: "added-after", value: "gone after the restore"))
        source.device.powerOff()
        let report = try PhoneRestore.restore(
            folder, password: nil, to: source.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        // The item added since, and those an iOS backup never holds: all gone, all named.
        #expect(report.localItemsLost.allSatisfy { $0.reason == .notInArchive })
        #expect(report.localItemsLost.count == 1 + report.neverExported.values.reduce(0, +))
        #expect(report.localItemsLost.contains { $0.name?.hasPrefix("added-after") == true })
    }

    @Test("an encrypted backup with fewer rounds than a phone's says what a password guess then costs")
    func weakRounds() throws {
        let fixture = try TestDevice(seed: 4)
        let url = fixture.directory.deletingLastPathComponent().appendingPathComponent("weak")
        let summary = try PhoneBackupWriter.create(
            from: fixture.device, to: url, options: .init(password: PhoneBackupTests.password, dataProtectionRounds: 1))
        #expect(summary.warnings.contains { $0.contains("1 rounds of PBKDF2-SHA256") && $0.contains("times less") })
        #expect(try PhoneBackupReader(folder: url).weakPasswordWarning != nil)
        #expect(PhoneBackupReader.weakRoundsWarning(PhoneIdentity.dataProtectionRounds) == nil)
    }
}
