import AppleFormats
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

    /// An internet password as a phone writes one: `ptcl` the integer of its four-character code.
    static func internetPassword(account: String, secret: String) -> [String: PropertyList] {
        var item = password(account: account, secret: secret)
        item["svce"] = nil
        item["srvr"] = .string("mail.example.com")
        item["ptcl"] = .integer(0x696D_7073)  // 'imps'
        item["atyp"] = .string("dflt")
        item["port"] = .integer(993)
        item["path"] = .string("/")
        return item
    }

    static func accessControl(_ acl: [String: PropertyList]) -> PropertyList {
        .data(try! DERPropertyList.encode(.dictionary(["prot": .string("ck"), "acl": .dictionary(acl)])))
    }

    /// Each attribute variant phones write, and what a restore makes of it: the attribute that
    /// must read back (nil: the item is dropped as one a phone never backs up).
    static let variants: [(name: String, table: String, change: @Sendable (inout [String: PropertyList]) -> Void, expect: [AttributeKey: AttributeValue]?)] = [
        ("uuid-as-data", "genp", { $0["UUID"] = .data(UUID().bytes) }, [.account: .string("uuid-as-data")]),
        (
            "bookkeeping", "genp",
            {
                $0["sha1"] = .data(Data(repeating: 7, count: 20))
                $0["persistref"] = .data(Data(repeating: 1, count: 12))
                $0["musr"] = .data(Data())
                $0["vwht"] = .string("Engram")
                $0["pcss"] = .integer(0)
                $0["labl"] = .string("Label")
            }, [.account: .string("bookkeeping"), .label: .string("Label")]
        ),
        (
            "dates-with-fractions", "genp",
            {
                $0["cdat"] = .date(Date(timeIntervalSinceReferenceDate: 700_000_000.25))
                $0["mdat"] = .date(Date(timeIntervalSinceReferenceDate: 700_000_000.5))
            }, [.account: .string("dates-with-fractions")]
        ),
        ("account-as-data", "genp", { $0["acct"] = .data(Data("account-as-data".utf8)) }, [.account: .data(Data("account-as-data".utf8))]),
        ("label-as-data", "genp", { $0["labl"] = .data(Data("Label".utf8)) }, [.label: .data(Data("Label".utf8))]),
        ("sync-as-boolean", "genp", { $0["sync"] = .boolean(false) }, [.account: .string("sync-as-boolean")]),
        ("tomb-zero-as-boolean", "genp", { $0["tomb"] = .boolean(false) }, [.account: .string("tomb-zero-as-boolean")]),
        ("clip-zero", "genp", { $0["clip"] = .integer(0) }, [.account: .string("clip-zero")]),
        ("acl-that-asks-nothing", "genp", { $0["accc"] = accessControl(["dacl": .boolean(true)]) }, [.account: .string("acl-that-asks-nothing")]),
        ("ptcl-integer", "inet", { _ in }, [.protocol: .string("imps"), .authenticationType: .string("dflt"), .port: .number(993)]),
        (
            "ptcl-string", "inet",
            {
                $0["ptcl"] = .string("imps")
                $0["atyp"] = .integer(0x6466_6C74)
            }, [.protocol: .string("imps"), .authenticationType: .string("dflt")]
        ),
        ("port-as-string", "inet", { $0["port"] = .string("993") }, [.port: .number(993)]),
        ("biometry", "genp", { $0["accc"] = accessControl(["od": .dictionary(["cbio": .dictionary(["pbioc": .data(Data())])]), "oe": .boolean(true)]) }, nil),
        (
            "passcode-or-biometry", "genp",
            { $0["accc"] = accessControl(["od": .dictionary(["pkofn": .dictionary(["cup": .boolean(true), "cbio": .dictionary([:])])])]) }, nil
        ),
        ("token", "genp", { $0["tkid"] = .string("com.apple.setoken") }, nil),
        ("app-clip", "genp", { $0["clip"] = .integer(1) }, nil),
        ("system-bound", "genp", { $0["sysb"] = .integer(1) }, nil),
    ]

    @Test("Apple's attributes as phones write them: each variant reads back with its attributes, or is dropped as a phone would never back it up")
    func phoneAttributes() throws {
        let setup = try Setup()
        var planted: [String: [[String: PropertyList]]] = [:]
        for variant in Self.variants {
            var item =
                variant.table == "inet"
                ? Self.internetPassword(account: variant.name, secret: "secret-\(variant.name)")
                : Self.password(account: variant.name, secret: "secret-\(variant.name)")
            variant.change(&item)
            planted[variant.table, default: []].append(item)
        }
        // A deleted synchronizable item's tombstone: nothing to restore, nothing to report.
        var tombstone = Self.password(account: "deleted", secret: "gone")
        tombstone["tomb"] = .integer(1)
        planted["genp", default: []].append(tombstone)
        for (table, items) in planted { try setup.plant(items, table: table) }
        let report = try setup.restore()
        let stored = try setup.items()
        for variant in Self.variants {
            // Found by their secret: the account itself is one of the variants.
            let secret = Data("secret-\(variant.name)".utf8)
            let item = stored.first { $0.data == secret }
            guard let expected = variant.expect else {
                #expect(item == nil, "\(variant.name) was restored")
                #expect(
                    report.items.contains { $0.reason == .neverBackedUp && $0.name?.contains(variant.name) == true }, "\(variant.name) is not reported dropped")
                continue
            }
            let restored = try #require(item, "\(variant.name) did not come back")
            for (key, value) in expected { #expect(restored.attributes[key] == value, "\(variant.name): \(key.name)") }
            #expect(restored.accessControl == nil)
            #expect(report.items.contains { $0.uuid == restored.uuid && $0.restored }, "\(variant.name) is not reported under its UUID")
        }
        let fractions = try #require(stored.first { $0.data == Data("secret-dates-with-fractions".utf8) })
        #expect(abs(fractions.creationDate.timeIntervalSinceReferenceDate - 700_000_000.25) < 0.001)
        #expect(abs(fractions.modificationDate.timeIntervalSinceReferenceDate - 700_000_000.5) < 0.001)
        #expect(!report.items.contains { $0.name?.hasPrefix("deleted") == true })
        #expect(!stored.contains { $0.data == Data("gone".utf8) })
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

    @Test("two items with one UUID, or one primary key: the later is restored, the earlier reported replaced, never restored and gone")
    func duplicates() throws {
        let setup = try Setup()
        let shared = UUID().uuidString
        var first = Self.password(account: "first-of-uuid", secret: "one")
        first["UUID"] = .string(shared)
        var second = Self.password(account: "second-of-uuid", secret: "two")
        second["UUID"] = .string(shared)
        let earlier = Self.password(account: "same-key", secret: "earlier")
        let later = Self.password(account: "same-key", secret: "later")
        try setup.plant([first, second, earlier, later])
        let report = try setup.restore()
        let stored = try setup.items()
        for outcome in report.items where outcome.restored {
            #expect(stored.contains { $0.uuid == outcome.uuid }, "\(outcome.name ?? "") is reported restored but is not in the store")
        }
        #expect(report.items.filter { $0.reason == .replacedInBackup }.count == 2)
        #expect(stored.contains { $0.data == Data("two".utf8) } && stored.contains { $0.data == Data("later".utf8) })
        #expect(!stored.contains { $0.data == Data("one".utf8) || $0.data == Data("earlier".utf8) })
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
