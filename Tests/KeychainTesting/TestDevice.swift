public import Foundation
import GRDB
public import KeychainModel
public import KeychainStore
import KeyferryCrypto

/// A device in a fresh temporary directory with a manual clock, seeded randomness and the
/// cheapest passcode hashing. The directory is removed when the fixture goes away.
public final class TestDevice: @unchecked Sendable {
    public let device: Device
    public let clock: ManualClock
    public let directory: URL
    public let passcode: String?
    private let root: URL

    public static let defaultPasscode = "123456"
    public static let teamID = "ABCDE12345"
    public static let appID = "com.example.app"

    public init(
        passcode: String? = TestDevice.defaultPasscode, biometry: Bool = false, grace: TimeInterval = 10, seed: UInt64 = 1,
        apps: [AppManifest] = [AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID)],
        clock: ManualClock = ManualClock()
    ) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-test-\(UUID().uuidString)")
        directory = root.appendingPathComponent("device")
        self.clock = clock
        self.passcode = passcode
        device = try Device.create(
            at: directory,
            options: DeviceOptions(
                name: "Test iPhone", passcode: passcode, enrollBiometry: biometry, gracePeriod: grace,
                passcodeHashing: .minimum),
            clock: clock, entropy: SeededEntropy(seed: seed))
        for app in apps { try device.install(app) }
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// The default app's keychain.
    public func keychain(_ bundleID: String = TestDevice.appID) throws -> Keychain { try device.keychain(for: bundleID) }

    /// Flips a byte of an item's sealed attributes in the store on disk, as damage or an edit
    /// would: its row then fails authentication. The device must be powered off.
    public func damageAttributes(of uuid: UUID) throws {
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("keychain.db").path)
        defer { try? queue.close() }
        try queue.write { db in
            guard var metadata = try Data.fetchOne(db, sql: "SELECT metadata FROM item WHERE uuid = ?", arguments: [uuid.bytes]) else {
                throw KeychainError(.itemNotFound, "no row holds item \(uuid)")
            }
            metadata[metadata.count / 2] ^= 0x01
            try db.execute(sql: "UPDATE item SET metadata = ? WHERE uuid = ?", arguments: [metadata, uuid.bytes])
        }
    }

    /// Every byte of every file under the device directory (the database, its WAL, sandboxes).
    public func allBytesOnDisk() throws -> [(path: String, bytes: Data)] {
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        var out = [(String, Data)]()
        while let url = enumerator?.nextObject() as? URL {
            if (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true {
                out.append((url.path, try Data(contentsOf: url)))
            }
        }
        return out
    }
}

extension NewItem {
    /// A generic password with the usual service and account.
    public static func password(
        account: String, service: String = "com.example.app", value: String = "secret",
        protection: ProtectionClass? = nil, synchronizable: Bool = false, accessGroup: String? = nil
    ) -> NewItem {
        NewItem(
            .genericPassword, attributes: [.account: .string(account), .service: .string(service)], data: Data(value.utf8),
            accessGroup: accessGroup, protection: protection, synchronizable: synchronizable)
    }

    /// A P-256 private key item as SecKeyCreateRandomKey stores one: in the Secure Enclave
    /// (`kSecAttrTokenID`) or not. Named by its label; a class that migrates unless told.
    public static func ellipticCurveKey(label: String, secureEnclave: Bool, protection: ProtectionClass = .afterFirstUnlock) -> NewItem {
        var attributes: Attributes = [
            .label: .string(label), .applicationLabel: .data(Data(label.utf8)), .keyClass: .number(1), .type: .number(73), .keySizeInBits: .number(256),
        ]
        if secureEnclave { attributes[.tokenID] = .string(NeverExported.secureEnclaveToken) }
        return NewItem(.key, attributes: attributes, data: Data(repeating: secureEnclave ? 1 : 2, count: 97), protection: protection)
    }
}

extension ItemQuery {
    /// A search for one generic password by its primary key, returning its data.
    public static func password(account: String, service: String = "com.example.app", synchronizable: SynchronizableMatch = .no) -> ItemQuery {
        ItemQuery(
            .genericPassword, attributes: [.account: .string(account), .service: .string(service)],
            synchronizable: synchronizable, returning: .data)
    }
}

/// The status a throwing keychain call ended with: success, or the error's status.
public func status(_ body: () throws -> Void) -> KeychainStatus {
    do {
        try body()
        return .success
    } catch let error as KeychainError {
        return error.status
    } catch {
        return .internalError
    }
}

/// Every file's bytes under a device directory, by relative path, but SQLite's `-shm`: its
/// shared-memory index, which any reader's connection rewrites (a restore reads the target to
/// check its passcode) and SQLite rebuilds from the database and its log. What "the target is
/// left as it was" compares.
public func deviceSnapshot(_ directory: URL) throws -> [String: Data] {
    var files: [String: Data] = [:]
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
    while let url = enumerator?.nextObject() as? URL {
        if !url.lastPathComponent.hasSuffix("-shm"), try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true {
            files[String(url.path.dropFirst(directory.path.count))] = try Data(contentsOf: url)
        }
    }
    return files
}
