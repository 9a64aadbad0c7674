import Foundation
import KeyferryCrypto

/// The keys that bind a device's backups to it, derived from its hardware UID: no other device
/// can derive them, and they never leave the device.
public struct DeviceBackupKeys: Sendable {
    /// The device that can derive these keys.
    public let deviceID: UUID
    /// Wraps the items that may come back only on this device.
    public let items: SymmetricKey
    /// Keys the digests that prove an unencrypted archive's sections came from this device.
    public let sections: SymmetricKey

    package init(deviceID: UUID, hardwareUID: SymmetricKey) {
        self.deviceID = deviceID
        items = hardwareUID.derive(context: "kfbackup")
        sections = hardwareUID.derive(context: "kfarcmac")
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
