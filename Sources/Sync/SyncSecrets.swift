import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import SyncWire

/// Where a member keeps its secrets: in its own keychain, as device-bound items of one access
/// group that apps are never entitled to. They never sync (not synchronizable), and a backup
/// carries them only under the device's own key (ThisDeviceOnly), so they never reach another
/// device.
enum SyncSecrets {
    static let accessGroup = Device.ownAccessGroup
    private static let protection = ProtectionClass.afterFirstUnlockThisDeviceOnly

    /// The device's identity, made on first use.
    static func identity(of device: Device) throws -> DeviceIdentity {
        DeviceIdentity(
            signingSeed: try secret(device, service: "identity", account: "signing", createIfMissing: true)!,
            sealingSeed: try secret(device, service: "identity", account: "sealing", createIfMissing: true)!)
    }

    /// `kSecAttrService` of the items of one kind (`identity`, `circle-key`).
    private static func service(_ kind: String) -> AttributeValue { .string("keyferry.sync.\(kind)") }

    /// Deletes every circle key this device holds: what leaving a circle forgets. The identity stays.
    static func forgetCircleKeys(_ device: Device) throws {
        let query = ItemQuery(.genericPassword, attributes: [.service: service("circle-key")], accessGroup: accessGroup)
        do {
            try device.deviceKeychain.delete(query)
        } catch let error as KeychainError where error.status == .itemNotFound {}
    }

    static func circleKey(_ device: Device, circle: UUID, epoch: UInt32) throws -> SymmetricKey? {
        try secret(device, service: "circle-key", account: "\(circle.uuidString)#\(epoch)", createIfMissing: false)
    }

    /// Keeps a generation's circle key. A generation has one: false when a different key is
    /// held for it already (the held one stays).
    @discardableResult
    static func storeCircleKey(_ key: SymmetricKey, _ device: Device, circle: UUID, epoch: UInt32) throws -> Bool {
        let account = "\(circle.uuidString)#\(epoch)"
        if let held = try secret(device, service: "circle-key", account: account, createIfMissing: false) { return held == key }
        try add(key, device, service: "circle-key", account: account)
        return true
    }

    private static func secret(_ device: Device, service: String, account: String, createIfMissing: Bool) throws -> SymmetricKey? {
        let query = ItemQuery(
            .genericPassword, attributes: [.service: self.service(service), .account: .string(account)],
            accessGroup: accessGroup, returning: .data)
        do {
            guard let data = try device.deviceKeychain.copy(query).first?.data else { return nil }
            return try SymmetricKey(bytes: [UInt8](data))
        } catch let error as KeychainError where error.status == .itemNotFound {
            guard createIfMissing else { return nil }
            let key = SymmetricKey()
            try add(key, device, service: service, account: account)
            return key
        }
    }

    private static func add(_ key: SymmetricKey, _ device: Device, service: String, account: String) throws {
        var bytes = key.exportedBytes
        defer { SymmetricKey.wipe(&bytes) }
        _ = try device.deviceKeychain.add(
            NewItem(
                .genericPassword, attributes: [.service: self.service(service), .account: .string(account)],
                data: Data(bytes), accessGroup: accessGroup, protection: protection, synchronizable: false))
    }
}
