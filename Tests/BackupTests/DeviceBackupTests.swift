import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import KeyferryThreads
import Synchronization
import Testing

@testable import Backup

@Suite("Backup create")
struct DeviceBackupTests {
    static let classes: [ProtectionClass] = [
        .whenUnlocked, .afterFirstUnlock, .always, .whenUnlockedThisDeviceOnly,
        .afterFirstUnlockThisDeviceOnly, .alwaysThisDeviceOnly, .whenPasscodeSetThisDeviceOnly,
    ]
    let password = Data("backup password".utf8)

    /// A device with one item per protection class (secret "marker-secret-CLASS", account
    /// "marker-account-CLASS") and a UserDefaults entry.
    func device() throws -> TestDevice {
        let fixture = try TestDevice()
        let keychain = try fixture.keychain()
        for protection in Self.classes {
            try keychain.add(
                .password(
                    account: "marker-account-\(protection.name)", value: "marker-secret-\(protection.name)",
                    protection: protection))
        }
        try fixture.device.sandbox(for: TestDevice.appID).set("marker-defaults", forKey: "token")
        return fixture
    }

    func archive() -> URL { FileManager.default.temporaryDirectory.appendingPathComponent("backup-\(UUID().uuidString).kfbackup") }

    /// Every archived item of a readable archive.
    func items(_ url: URL, password: Data?) throws -> [ArchivedItem] {
        var items: [ArchivedItem] = []
        try ArchiveReader(contentsOf: url).read(password: password) { kind, content in
            if kind == .keychain { items += try EntryList.decode(content).map(ArchivedItem.init(decoding:)) }
        }
        return items
    }

    /// What the items of the archive at `url` are bound to.
    func binding(_ url: URL) throws -> ItemBinding { try ArchiveReader(contentsOf: url).sectionKeys(password: nil, device: nil).items }

    @Test("encrypted: migratable items under the backup keybag, ThisDeviceOnly under the device key, akpu never; no marker in the file")
    func encrypted() throws {
        let fixture = try device()
        let url = archive()
        defer { try? FileManager.default.removeItem(at: url) }
        let manifest = try DeviceBackup.create(from: fixture.device, to: url, mode: .encrypted(password: password, parameters: .minimum))
        #expect(manifest.counts["items.genericPassword.whenPasscodeSetThisDeviceOnly"] == 1)
        #expect(manifest.counts["notExported.genericPassword.whenPasscodeSetThisDeviceOnly"] == 1)
        #expect(manifest.counts["apps"] == 1 && manifest.counts["sandboxFiles"] == 1)
        #expect(manifest.warnings.contains { $0.contains("never exported") })

        let archived = try items(url, password: password)
        #expect(archived.count == 6)
        let keys = try ArchiveReader(contentsOf: url).sectionKeys(password: password, device: nil)
        let keybag = try #require(keys.backupKeybag)
        let binding = keys.items
        for item in archived {
            #expect(item.wrapping == (item.protection.isThisDeviceOnly ? .device : .backup))
            let key = try #require(item.wrapping == .backup ? keybag.key(for: item.protection) : fixture.device.backupKeys.items)
            #expect(try item.open(with: key, binding: binding).secret() == Data("marker-secret-\(item.protection.name)".utf8))
        }
        let bytes = try Data(contentsOf: url)
        for marker in ["marker-secret", "marker-account", "marker-defaults"] {
            #expect(bytes.range(of: Data(marker.utf8)) == nil, "\(marker) is readable in the encrypted archive")
        }
    }

    @Test("unencrypted: every item under the device key only, which another device cannot derive; sandboxes in plain, with warnings")
    func unencrypted() throws {
        let fixture = try device()
        let other = try TestDevice(seed: 99)
        let url = archive()
        defer { try? FileManager.default.removeItem(at: url) }
        let manifest = try DeviceBackup.create(from: fixture.device, to: url, mode: .unencrypted)
        #expect(manifest.warnings.contains { $0.contains("restore only onto the device") })
        #expect(manifest.warnings.contains { $0.contains("stored in plain") })
        let archived = try items(url, password: nil)
        #expect(archived.count == 6 && archived.allSatisfy { $0.wrapping == .device })
        for item in archived {
            #expect(
                try item.open(with: fixture.device.backupKeys.items, binding: binding(url)).record.attributes[.account]
                    == .string("marker-account-\(item.protection.name)"))
            #expect(throws: CryptoError.authenticationFailed) { try item.open(with: other.device.backupKeys.items, binding: binding(url)) }
        }
        let bytes = try Data(contentsOf: url)
        #expect(bytes.range(of: Data("marker-secret".utf8)) == nil)
        // A legacy plaintext secret in UserDefaults is readable, as from an iOS unencrypted backup.
        var defaults: [SandboxEntry] = []
        try ArchiveReader(contentsOf: url).read(password: nil) { kind, content in
            if kind == .sandbox { defaults += try EntryList.decode(content).map(SandboxEntry.init(decoding:)) }
        }
        #expect(defaults.count == 1 && defaults[0].contents.range(of: Data("marker-defaults".utf8)) != nil)
    }

    @Test("the device answers status, reads and writes while a backup of 50,000 items runs", .blocking)
    func answersDuringBackup() throws {
        let fixture = try TestDevice()
        let group = "\(TestDevice.teamID).\(TestDevice.appID)"
        let records = (0..<50_000).map { n in
            ItemRecord(
                itemClass: .genericPassword, uuid: UUID(), accessGroup: group, protection: .afterFirstUnlock, synchronizable: false,
                accessControl: nil, creationDate: Date(), modificationDate: Date(),
                attributes: [.account: .string("bulk-\(n)"), .service: .string("com.example.app")], data: Data("secret-\(n)".utf8))
        }
        try fixture.device.deviceKeychain.restore(records)
        let url = archive()
        defer { try? FileManager.default.removeItem(at: url) }
        let device = fixture.device
        let keychain = try fixture.keychain()
        // The backup and the calls each on a thread of their own, as a node runs them: nothing
        // here waits for the cooperative pool, which the rest of the suite keeps busy.
        let state = BackupState()
        Thread {
            defer { state.done.store(true, ordering: .relaxed) }
            do {
                _ = try DeviceBackup.create(from: device, to: url, mode: .unencrypted) { _, _ in
                    // After the first batch the export's read is open until its last: it waits
                    // here (30 s at most) for three rounds of calls to the device to be answered.
                    guard !state.started.exchange(true, ordering: .relaxed) else { return }
                    let deadline = Date().addingTimeInterval(30)
                    while state.answered.load(ordering: .relaxed) < 3, Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
                }
            } catch {
                state.failure.withLock { $0 = "\(error)" }
            }
        }.start()
        while !state.started.load(ordering: .relaxed), !state.done.load(ordering: .relaxed) { Thread.sleep(forTimeInterval: 0.002) }
        var slowest: TimeInterval = 0
        while !state.done.load(ordering: .relaxed) {
            let start = Date()
            _ = try device.status()
            _ = try keychain.copy(.password(account: "bulk-7"))
            _ = try keychain.update(.password(account: "bulk-7"), with: ItemChanges(data: Data("during".utf8)))
            let took = Date().timeIntervalSince(start)
            if !state.done.load(ordering: .relaxed) {
                state.answered.add(1, ordering: .relaxed)
                slowest = max(slowest, took)
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        #expect(state.failure.withLock { $0 } == nil)
        #expect(state.answered.load(ordering: .relaxed) >= 3, "the device answered while the backup's read was open")
        #expect(slowest < 1, "status, a read and a write took up to \(slowest) s while the backup ran")
    }

    final class BackupState: Sendable {
        let started = Atomic(false)
        let answered = Atomic(0)
        let done = Atomic(false)
        let failure = Locked<String?>(nil)
    }

    @Test("a locked device is refused and no archive is written")
    func locked() throws {
        let fixture = try device()
        try fixture.device.lock(immediately: true)
        let url = archive()
        #expect(throws: DeviceError.self) { try DeviceBackup.create(from: fixture.device, to: url, mode: .unencrypted) }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test("a backup stopped by its progress leaves nothing beside the destination, nor under its name")
    func stopped() throws {
        let fixture = try device()
        let url = archive()
        var calls = 0
        #expect(throws: CancellationError.self) {
            try DeviceBackup.create(from: fixture.device, to: url, mode: .unencrypted) { _, _ in
                calls += 1
                throw CancellationError()
            }
        }
        #expect(calls == 1)
        let beside = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
        #expect(!beside.contains { $0.contains(url.lastPathComponent) }, "\(beside)")
    }

    @Test("an item moved into another archive of the same device does not open")
    func boundToArchive() throws {
        let fixture = try device()
        let first = archive()
        let second = archive()
        defer {
            try? FileManager.default.removeItem(at: first)
            try? FileManager.default.removeItem(at: second)
        }
        try DeviceBackup.create(from: fixture.device, to: first, mode: .unencrypted)
        try DeviceBackup.create(from: fixture.device, to: second, mode: .unencrypted)
        let item = try #require(try items(first, password: nil).first)
        #expect(try item.open(with: fixture.device.backupKeys.items, binding: binding(first)).record.uuid == item.uuid)
        #expect(throws: CryptoError.authenticationFailed) { try item.open(with: fixture.device.backupKeys.items, binding: binding(second)) }
    }

    @Test("an item moved onto another entry does not open")
    func boundToEntry() throws {
        let fixture = try device()
        let url = archive()
        defer { try? FileManager.default.removeItem(at: url) }
        try DeviceBackup.create(from: fixture.device, to: url, mode: .unencrypted)
        var archived = try items(url, password: nil)
        archived[0].sealed = archived[1].sealed
        #expect(throws: CryptoError.authenticationFailed) { try archived[0].open(with: fixture.device.backupKeys.items, binding: binding(url)) }
    }

    @Test("a sealed record whose group or sync flag is not its entry's does not open: the device's own group hides behind no other")
    func boundToGroupAndSync() throws {
        let fixture = try device()
        let url = archive()
        defer { try? FileManager.default.removeItem(at: url) }
        try DeviceBackup.create(from: fixture.device, to: url, mode: .unencrypted)
        let key = fixture.device.backupKeys.items
        let genuine = try #require(try items(url, password: nil).first)
        #expect(try genuine.open(with: key, binding: binding(url)).record.accessGroup == genuine.accessGroup)
        var regrouped = genuine
        regrouped.accessGroup = "ABCDE12345.elsewhere"
        #expect(throws: CryptoError.authenticationFailed) { try regrouped.open(with: key, binding: binding(url)) }
        var resynced = genuine
        resynced.synchronizable.toggle()
        #expect(throws: CryptoError.authenticationFailed) { try resynced.open(with: key, binding: binding(url)) }
    }
}
