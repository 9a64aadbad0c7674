import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

@Suite("Encryption at rest")
struct EncryptionAtRestTests {
    /// Marker strings planted in every kind of attribute and in secrets; none may reach the disk.
    static let markers = (0..<12).map { "KFMARKER\($0)-\(String(repeating: "q", count: 6))" }

    @Test("no attribute value and no secret appears in plaintext anywhere in the device directory")
    func noPlaintextOnDisk() throws {
        let t = try TestDevice(biometry: true)
        let keychain = try t.keychain()
        let m = Self.markers.map { Data($0.utf8) }
        let s = Self.markers
        try keychain.add(
            NewItem(
                .genericPassword,
                attributes: [
                    .account: .string(s[0]), .service: .string(s[1]), .label: .string(s[2]),
                    .generic: .data(m[3]), .comment: .string(s[4]),
                ], data: m[5]))
        try keychain.add(
            NewItem(
                .internetPassword, attributes: [.server: .string(s[6]), .account: .string(s[7]), .path: .string(s[8])],
                data: m[9], protection: .afterFirstUnlockThisDeviceOnly, synchronizable: false))
        try keychain.add(
            NewItem(.key, attributes: [.applicationTag: .data(m[10]), .keyClass: .number(1)], data: m[11], protection: .whenPasscodeSetThisDeviceOnly))
        try keychain.add(NewItem(.genericPassword, attributes: [.account: .string("synced" + s[0])], data: m[1], synchronizable: true))
        // Updates, a tombstone, a lock cycle and a reboot write more pages and WAL frames.
        try keychain.update(
            ItemQuery(.genericPassword, attributes: [.account: .string(s[0])]),
            with: ItemChanges(attributes: [.label: .string("relabelled" + s[2])], data: Data(("new" + s[5]).utf8)))
        try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("synced" + s[0])], synchronizable: .yes))
        try t.device.lock(immediately: true)
        try t.device.reboot()
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        try t.device.setPasscode("999999", current: TestDevice.defaultPasscode)

        let files = try t.allBytesOnDisk()
        #expect(files.contains { $0.path.hasSuffix("keychain.db-wal") }, "the scan must include the write-ahead log")
        for file in files {
            for marker in Self.markers {
                #expect(file.bytes.range(of: Data(marker.utf8)) == nil, "\(marker) found in \(file.path)")
                #expect(file.bytes.range(of: Data(marker.dropFirst(2).utf8)) == nil, "part of \(marker) found in \(file.path)")
            }
        }
    }

    @Test("after the passcode is removed, the class keys it wrapped are in neither the database nor its write-ahead log")
    func oldWrappedKeysErased() throws {
        let t = try TestDevice()
        try t.keychain().add(NewItem(.genericPassword, attributes: [.account: .string("a")], data: Data("x".utf8), protection: .whenPasscodeSetThisDeviceOnly))
        let database = t.directory.appendingPathComponent("keychain.db")
        func wrappedKeys() throws -> [Data] {
            try DatabaseQueue(path: database.path).read { try Data.fetchAll($0, sql: "SELECT wrapped_key FROM class_key") }
        }
        let before = try wrappedKeys()
        try t.device.removePasscode(current: TestDevice.defaultPasscode)
        // Class D keys were never under the passcode, and stay as they were.
        let after = try wrappedKeys()
        let replaced = before.filter { !after.contains($0) }
        #expect(replaced.count == 5, "ak, ck, aku, cku rewrapped and akpu gone")
        let files = try t.allBytesOnDisk()
        #expect(files.contains { $0.path.hasSuffix("keychain.db") })
        for file in files {
            for key in replaced {
                #expect(file.bytes.range(of: key) == nil, "a class key wrapped under the old passcode is still in \(file.path)")
            }
        }
    }

    @Test("the hardware UID has owner-only permissions and is stored nowhere else")
    func hardwareUID() throws {
        let t = try TestDevice()
        let uidPath = t.directory.appendingPathComponent("hardware-uid").path
        let permissions = try FileManager.default.attributesOfItem(atPath: uidPath)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let uid = try Data(contentsOf: URL(fileURLWithPath: uidPath))
        #expect(uid.count == 32)
        for file in try t.allBytesOnDisk() where file.path != uidPath {
            #expect(file.bytes.range(of: uid) == nil, "hardware UID copied into \(file.path)")
        }
    }

    /// Creates a device with one item, closes it, lets `tamper` edit the database file, then
    /// powers a new instance on and returns its keychain.
    func tampered(_ tamper: (URL, DatabaseQueue) throws -> Void) throws -> (Keychain, URL) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-tamper-\(UUID().uuidString)")
        let directory = root.appendingPathComponent("device")
        do {
            let device = try Device.create(at: directory, options: DeviceOptions(passcodeHashing: .minimum), clock: ManualClock())
            try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
            let keychain = try device.keychain(for: TestDevice.appID)
            try keychain.add(.password(account: "first", value: "first-secret"))
            try keychain.add(.password(account: "second", value: "second-secret"))
        }
        let database = directory.appendingPathComponent("keychain.db")
        do {
            let queue = try DatabaseQueue(path: database.path)
            try tamper(database, queue)
        }
        let device = try Device.powerOn(at: directory, clock: ManualClock())
        return (try device.keychain(for: TestDevice.appID), root)
    }

    /// Flips one byte of `blob` where it sits in the database file.
    static func flipByte(of blob: Data, at offset: Int, in file: URL) throws {
        var bytes = try Data(contentsOf: file)
        let range = try #require(bytes.range(of: blob), "the blob must be in the main database file")
        bytes[range.lowerBound + offset] ^= 0x01
        try bytes.write(to: file)
    }

    @Test("a flipped byte in an item's attributes is errSecDecode, never data")
    func flippedMetadataByte() throws {
        let (keychain, root) = try tampered { file, queue in
            let blob = try queue.read { try Data.fetchOne($0, sql: "SELECT metadata FROM item ORDER BY id LIMIT 1") }!
            try queue.close()
            try Self.flipByte(of: blob, at: blob.count / 2, in: file)
        }
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try keychain.copy(.password(account: "first")) } == .decode)
        #expect(try keychain.copy(.password(account: "second")).first?.data == Data("second-secret".utf8), "other items are unaffected")
    }

    @Test("a flipped byte in an item's secret is errSecDecode for data; its attributes still read")
    func flippedSecretByte() throws {
        let (keychain, root) = try tampered { file, queue in
            let blob = try queue.read { try Data.fetchOne($0, sql: "SELECT secret FROM item ORDER BY id LIMIT 1") }!
            try queue.close()
            try Self.flipByte(of: blob, at: blob.count - 3, in: file)
        }
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try keychain.copy(.password(account: "first")) } == .decode)
        var attributesOnly = ItemQuery.password(account: "first")
        attributesOnly.returning = .attributes
        #expect(try keychain.copy(attributesOnly).count == 1)
    }

    @Test("a row's item key and ciphertexts moved whole onto another row, or its key's wrap removed, are detected")
    func movedItemKey() throws {
        let (keychain, root) = try tampered { _, queue in
            try queue.write { db in
                // The second row's key and both its ciphertexts on the first row: the wrap is
                // bound to the first row's columns, and the ciphertexts to the second's UUID.
                try db.execute(
                    sql: """
                        UPDATE item SET (wrapped_key, metadata, secret) =
                            (SELECT wrapped_key, metadata, secret FROM item WHERE id = (SELECT MAX(id) FROM item))
                        WHERE id = (SELECT MIN(id) FROM item)
                        """)
                // Its wrap removed, a row's metadata (which binds it) opens under no key.
                try db.execute(sql: "UPDATE item SET wrapped_key = NULL WHERE id = (SELECT MAX(id) FROM item)")
            }
        }
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try keychain.copy(.password(account: "first")) } == .decode)
        #expect(status { _ = try keychain.copy(.password(account: "second")) } == .decode)
    }

    @Test("secrets swapped between two rows are detected")
    func swappedRows() throws {
        let (keychain, root) = try tampered { _, queue in
            try queue.write { db in
                let secrets = try Data.fetchAll(db, sql: "SELECT secret FROM item ORDER BY id")
                try db.execute(sql: "UPDATE item SET secret = ? WHERE id = (SELECT MIN(id) FROM item)", arguments: [secrets[1]])
                try db.execute(sql: "UPDATE item SET secret = ? WHERE id = (SELECT MAX(id) FROM item)", arguments: [secrets[0]])
            }
        }
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try keychain.copy(.password(account: "first")) } == .decode)
        #expect(status { _ = try keychain.copy(.password(account: "second")) } == .decode)
    }

    @Test("relabelling a row as class D to read it while locked is detected")
    func relabelledProtectionClass() throws {
        let (keychain, root) = try tampered { _, queue in
            try queue.write { try $0.execute(sql: "UPDATE item SET pdmn = 'dk'") }
        }
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(status { _ = try keychain.copy(.password(account: "first")) } == .decode)
    }
}
