import AppleFormats
import Crypto
import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

@testable import PhoneBackup

@Suite("iOS backups, written and restored")
struct PhoneBackupTests {
    static let classes: [ProtectionClass] = [
        .whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly, .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly,
        .whenPasscodeSetThisDeviceOnly,
    ]
    static let password = Data("correct horse".utf8)
    /// One round of PBKDF2-SHA256: the format is the same, the cost a phone's is paid in the
    /// command-line tests and the benchmarks.
    static let cheap = UInt32(1)

    /// A device with an item per protection class (`acct-CLASS`, secret `secret-CLASS`), an
    /// internet password, an item behind biometry, a UserDefaults entry and two Documents files.
    static func source(seed: UInt64 = 1) throws -> TestDevice {
        let fixture = try TestDevice(seed: seed)
        let keychain = try fixture.keychain()
        for protection in classes {
            try keychain.add(.password(account: "acct-\(protection.name)", value: "secret-\(protection.name)", protection: protection))
        }
        try keychain.add(.password(account: "acct-synced", value: "secret-synced", protection: .afterFirstUnlock, synchronizable: true))
        try keychain.add(
            NewItem(
                .internetPassword,
                attributes: [.account: .string("alice"), .server: .string("mail.example.com"), .port: .number(993), .label: .string("Mail")],
                data: Data("imap-secret".utf8), protection: .afterFirstUnlock))
        var guarded = NewItem.password(account: "acct-biometry", value: "secret-biometry")
        guarded.accessControl = try AccessControl(protection: .whenUnlockedThisDeviceOnly, flags: .biometryAny)
        guarded.protection = .whenUnlockedThisDeviceOnly
        try keychain.add(guarded)
        try keychain.add(.ellipticCurveKey(label: "enclave key", secureEnclave: true))
        let sandbox = try fixture.device.sandbox(for: TestDevice.appID)
        try sandbox.set("alice", forKey: "signedInUser")
        try sandbox.writeFile("notes/today.txt", Data("remember the milk".utf8), protection: .complete)
        try sandbox.writeFile("empty", Data(), protection: .none)
        return fixture
    }

    static func write(_ fixture: TestDevice, encrypted: Bool = true) throws -> URL {
        let url = fixture.directory.deletingLastPathComponent().appendingPathComponent("backup-\(UUID().uuidString.prefix(8))")
        try PhoneBackupWriter.create(
            from: fixture.device, to: url, options: .init(password: encrypted ? password : nil, dataProtectionRounds: cheap))
        return url
    }

    /// Accounts and secrets on the device in `directory`.
    static func contents(_ directory: URL) throws -> [String: String] {
        let device = try Device.powerOn(at: directory)
        defer { device.powerOff() }
        try device.unlock(passcode: TestDevice.defaultPasscode)
        var found: [String: String] = [:]
        for change in try device.deviceKeychain.changes(since: 0, includingData: true) where !change.isTombstone {
            if case .string(let account) = change.record.attributes[.account] {
                found[account] = String(decoding: change.record.data ?? Data(), as: UTF8.self)
            }
        }
        return found
    }

    @Test("the folder is a phone's: its files, Manifest.plist's keys, and a blob per file under its SHA-1 id")
    func layout() throws {
        let fixture = try Self.source()
        let url = try Self.write(fixture)
        for name in ["Info.plist", "Manifest.plist", "Status.plist", "Manifest.db"] {
            #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path), "\(name)")
        }
        let manifest = try BinaryPropertyList.decode(try Data(contentsOf: url.appendingPathComponent("Manifest.plist")))
        #expect(manifest["IsEncrypted"] == .boolean(true))
        #expect(manifest["ManifestKey"]?.data?.count == 44)
        #expect(manifest["Lockdown"]?["ProductVersion"]?.string == "26.1")
        #expect(manifest["Applications"]?[TestDevice.appID] != nil)
        let keybag = try BackupKeybag(tlv: try #require(manifest["BackupKeyBag"]?.data))
        #expect(keybag.classes.map(\.protectionClass).sorted() == Array(1...11))
        #expect(keybag.sealedToDevice == [5, 9, 10, 11])
        let id = BackupFileCrypto.fileID(domain: "KeychainDomain", relativePath: "keychain-backup.plist")
        #expect(FileManager.default.fileExists(atPath: url.appendingPathComponent("\(id.prefix(2))/\(id)").path))
        // Manifest.db is sealed: SQLite's header is not in plain.
        let sealed = try Data(contentsOf: url.appendingPathComponent("Manifest.db"))
        #expect(!sealed.starts(with: Array("SQLite format 3".utf8)))
        #expect(sealed.count % 16 == 0)
    }

    @Test(
        "onto a new device: every migratable item, file and default comes back; ThisDeviceOnly ones are sealed to the source; akpu and biometry items were never written"
    )
    func newDevice() throws {
        let fixture = try Self.source()
        let url = try Self.write(fixture)
        let target = try TestDevice(seed: 9, apps: [])
        target.device.powerOff()
        let report = try PhoneRestore.restore(url, password: Self.password, to: target.directory, passcode: TestDevice.defaultPasscode)
        #expect(report.format == .ios)
        #expect(!report.sameDevice)
        #expect(report.apps == [TestDevice.appID])
        #expect(report.sandboxFiles == 3)
        let restored = try Self.contents(target.directory)
        #expect(
            restored == [
                "acct-whenUnlocked": "secret-whenUnlocked", "acct-afterFirstUnlock": "secret-afterFirstUnlock", "acct-always": "secret-always",
                "acct-synced": "secret-synced", "alice": "imap-secret",
            ])
        let dropped = report.items.filter { !$0.restored }
        #expect(dropped.count == 3)
        #expect(dropped.allSatisfy { $0.reason == .sealedToSourceDevice && $0.protection.isThisDeviceOnly })
        #expect(
            report.neverExported == ["genericPassword.whenPasscodeSetThisDeviceOnly": 1, "genericPassword.accessControl": 1, "key.secureEnclave": 1])

        let device = try Device.powerOn(at: target.directory)
        defer { device.powerOff() }
        try device.unlock(passcode: TestDevice.defaultPasscode)
        let sandbox = try device.sandbox(for: TestDevice.appID)
        #expect(try sandbox.string(forKey: "signedInUser") == "alice")
        #expect(try sandbox.readFile("notes/today.txt") == Data("remember the milk".utf8))
        #expect(try sandbox.readFile("empty") == Data())
        #expect(try sandbox.files().first { $0.path == "notes/today.txt" }?.protection == .complete)
        #expect(try device.app(TestDevice.appID).teamID == TestDevice.teamID)
        // Attributes come back as they were: the internet password's server, port and label.
        let mail = try #require(try device.deviceKeychain.changes(since: 0).first { $0.record.itemClass == .internetPassword }?.record)
        #expect(mail.attributes[.server] == .string("mail.example.com"))
        #expect(mail.attributes[.port] == .number(993))
        #expect(mail.attributes[.label] == .string("Mail"))
        #expect(mail.accessGroup == "\(TestDevice.teamID).\(TestDevice.appID)")
    }

    @Test("onto the device that wrote it, ThisDeviceOnly items come back too, encrypted or not")
    func sameDevice() throws {
        for encrypted in [true, false] {
            let fixture = try Self.source()
            let url = try Self.write(fixture, encrypted: encrypted)
            fixture.device.powerOff()
            let report = try PhoneRestore.restore(
                url, password: encrypted ? Self.password : nil, to: fixture.directory, passcode: TestDevice.defaultPasscode,
                acceptingUnauthenticated: !encrypted)
            #expect(report.sameDevice)
            #expect(report.items.filter { !$0.restored }.isEmpty, "\(report.items.filter { !$0.restored })")
            #expect(try Self.contents(fixture.directory).count == 8)
        }
    }

    @Test("an unencrypted backup on another device brings the apps and files, and no keychain item")
    func unencryptedElsewhere() throws {
        let fixture = try Self.source()
        let url = try Self.write(fixture, encrypted: false)
        let manifest = try BinaryPropertyList.decode(try Data(contentsOf: url.appendingPathComponent("Manifest.plist")))
        #expect(manifest["IsEncrypted"] == .boolean(false))
        #expect(manifest["ManifestKey"] == nil)
        // Manifest.db and files are in plain, as a phone writes them unencrypted.
        #expect(try Data(contentsOf: url.appendingPathComponent("Manifest.db")).starts(with: Array("SQLite format 3".utf8)))
        let target = try TestDevice(seed: 9, apps: [])
        target.device.powerOff()
        let before = try target.allBytesOnDisk().map(\.bytes)
        // Nothing proves who wrote it: refused, untouched, unless the user vouches for it.
        #expect {
            try PhoneRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode)
        } throws: { ($0 as? PhoneBackupError) == .unauthenticated(sameDevice: false) }
        #expect(try target.allBytesOnDisk().map(\.bytes) == before)
        let report = try PhoneRestore.restore(
            url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        #expect(report.authenticity == .unauthenticated)
        #expect(report.restoredCount == 0)
        #expect(report.items.count == 8)
        #expect(report.items.allSatisfy { $0.reason == .sealedToSourceDevice })
        #expect(report.sandboxFiles == 3)
    }

    @Test(
        "a wrong or missing password is refused and the target left as it was, whatever passcode comes with it (a wrong one is not counted)"
    )
    func wrongPassword() throws {
        let fixture = try Self.source()
        let url = try Self.write(fixture)
        let target = try TestDevice(seed: 9)
        target.device.powerOff()
        let before = try deviceSnapshot(target.directory)
        for passcode in [TestDevice.defaultPasscode, "000009", nil] {
            #expect {
                try PhoneRestore.restore(url, password: Data("wrong".utf8), to: target.directory, passcode: passcode)
            } throws: { "\($0)".contains("wrong password") }
        }
        #expect {
            try PhoneRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode)
        } throws: { "\($0)".contains("is encrypted") }
        let after = try deviceSnapshot(target.directory)
        #expect(after == before, "changed: \(after.filter { before[$0.key] != $0.value }.keys.sorted()), \(Set(before.keys).symmetricDifference(after.keys))")
    }

    @Test("the writer refuses an existing folder and leaves nothing behind when stopped")
    func writerRefusals() throws {
        let fixture = try Self.source()
        let parent = fixture.directory.deletingLastPathComponent()
        let existing = parent.appendingPathComponent("existing")
        try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: false)
        #expect(throws: PhoneBackupError.self) {
            try PhoneBackupWriter.create(from: fixture.device, to: existing, options: .init(password: Self.password, dataProtectionRounds: Self.cheap))
        }
        struct Stop: Error {}
        let stopped = parent.appendingPathComponent("stopped")
        #expect(throws: Stop.self) {
            try PhoneBackupWriter.create(from: fixture.device, to: stopped, options: .init(password: Self.password, dataProtectionRounds: Self.cheap)) {
                if case .writing(let done, _) = $0, done > 0 { throw Stop() }
            }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: parent.path).filter { $0 != "device" && $0 != "existing" }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("verify reads every file and opens every item it can")
    func verify() throws {
        let fixture = try Self.source()
        let url = try Self.write(fixture)
        let elsewhere = try PhoneBackupReader(folder: url).open(password: Self.password, device: nil).verify()
        #expect(elsewhere.files == 4)
        #expect(elsewhere.itemsOpened == 5)
        #expect(elsewhere.itemsSealedToSourceDevice == 3)
        #expect(elsewhere.sizeMismatches.isEmpty)
        let home = try PhoneBackupReader(folder: url).open(password: Self.password, device: fixture.device.backupKeys).verify()
        #expect(home.itemsOpened == 8)
    }
}
