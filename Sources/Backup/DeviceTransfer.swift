package import Foundation
package import KeychainModel
package import KeychainStore

/// Quick Start, the device-to-device transfer of a new iPhone: the apps, their sandboxes and
/// every keychain item allowed to leave the device move onto another one; ThisDeviceOnly items
/// stay behind, as from an encrypted backup restored elsewhere. In transit the items are sealed:
/// an encrypted archive under a one-time random key that exists only in memory, removed as
/// soon as it is read.
package enum DeviceTransfer {
    package enum Stage: String, Sendable {
        /// The source seals what it sends.
        case sending
        /// The target opens and stores it.
        case receiving
    }

    /// Transfers from a powered-on, unlocked `source` onto the powered-off device at `target`,
    /// which must be another device (`passcode` is the target's own). The target is rebuilt aside
    /// and swapped in only when complete, as a restore is. `progress` may throw to stop.
    package static func transfer(
        from source: Device, to target: URL, passcode: String?,
        progress: (_ stage: Stage, _ done: Int, _ total: Int) throws -> Void = { _, _, _ in }
    ) throws -> RestoreReport {
        try requireAnotherDevice(target, than: source)
        return try sealed(from: source, beside: target, progress: progress) { archive, key in
            try DeviceRestore.restore(archive, password: key, to: target, passcode: passcode) { try progress(.receiving, $0, $1) }
        }
    }

    /// Fails unless `target` holds a device other than `source`: the first check of a transfer,
    /// made before anything is held or touched.
    package static func requireAnotherDevice(_ target: URL, than source: Device) throws {
        guard try Device.info(at: target).id != source.info.id else {
            throw DeviceError(.invalidArgument, "\(target.path) is \(source.info.name) itself; Quick Start moves a device onto another one.")
        }
    }

    /// Transfers straight into a powered-on, unlocked scratch device, with no copy aside.
    package static func transfer(from source: Device, into target: Device) throws -> RestoreReport {
        try sealed(from: source, beside: target.directory, progress: { _, _, _ in }) { archive, key in
            try DeviceRestore.restore(archive, password: key, into: target)
        }
    }

    private static func sealed(
        from source: Device, beside target: URL, progress: (Stage, Int, Int) throws -> Void,
        receive: (_ archive: URL, _ key: Data) throws -> RestoreReport
    ) throws -> RestoreReport {
        let archive = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).transfer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: archive) }
        let key = try DeviceBackup.createUnderRandomKey(from: source, to: archive) { try progress(.sending, $0, $1) }
        return try receive(archive, key)
    }
}
