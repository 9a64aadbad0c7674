public import Foundation
import KeychainModel
package import KeyferryCrypto

/// The keys that bind a device's backups to it, derived from its hardware UID: no other device
/// can derive them, and they never leave the device.
package struct DeviceBackupKeys: Sendable {
    /// The device that can derive these keys.
    package let deviceID: UUID
    /// Wraps the items that may come back only on this device.
    package let items: SymmetricKey
    /// Keys the digests that prove an unencrypted archive's sections came from this device.
    package let sections: SymmetricKey
    /// Stands in for a phone's UID-derived key 0x835 in the iOS backups it writes: what ties
    /// the ThisDeviceOnly class keys (and, unencrypted, every keychain class key) to this device.
    package let phoneDeviceKey: SymmetricKey

    package init(deviceID: UUID, hardwareUID: SymmetricKey) {
        self.deviceID = deviceID
        items = hardwareUID.derive(context: "kfbackup")
        sections = hardwareUID.derive(context: "kfarcmac")
        phoneDeviceKey = hardwareUID.derive(context: "kf0x835_")
    }
}

extension Device {
    /// The backup keys of the device in `directory`, read without powering it on (a node may
    /// be running it): for checking that an unencrypted archive came from it.
    package static func backupKeys(at directory: URL) throws -> DeviceBackupKeys {
        let info = try info(at: directory)
        return DeviceBackupKeys(deviceID: info.id, hardwareUID: try hardwareUID(in: DeviceLayout(root: directory)))
    }

    static func hardwareUID(in layout: DeviceLayout) throws -> SymmetricKey {
        guard let data = FileManager.default.contents(atPath: layout.hardwareUID.path), data.count == SymmetricKey.byteCount else {
            throw DeviceError(
                .corrupt, "\(layout.hardwareUID.path) is missing or not 32 bytes; without its hardware UID the device's keychain cannot be opened.")
        }
        return try SymmetricKey(bytes: data)
    }
}

extension Device {
    /// When this device last made a backup of itself; nil when it never did (or before
    /// Keyferry recorded it). A restore of an older archive of this device is reported, since
    /// archives carry no freshness of their own: an older genuine one put in place of the
    /// newest verifies just as well.
    public var lastBackupCreated: Date? {
        let data = FileManager.default.contents(atPath: layout.lastBackup.path) ?? Data()
        return (try? JSONDecoder().decode(BackupRecord.self, from: data)).map { Date(timeIntervalSinceReferenceDate: $0.created) }
    }

    /// Records a backup this device made, created at `created`, unless it knows a newer one.
    public func recordBackup(created: Date) throws {
        if let last = lastBackupCreated, last >= created { return }
        let record = BackupRecord(created: created.timeIntervalSinceReferenceDate)
        try JSONEncoder().encode(record).write(to: layout.lastBackup, options: .atomic)
    }
}

/// `last-backup.json`: seconds since 2001 to the full precision of the archive's header, so two
/// backups made within a second still tell which came last.
private struct BackupRecord: Codable {
    var created: Double
}
