import Foundation
import KeychainModel
import KeychainStore
import NodeControl
import Survival

/// What the command line can learn of a device whose node is not running: read in this
/// process, from the device at rest, holding its node lock meanwhile.
extension NodeClient {
    /// The device's status: from its node when it runs, otherwise read from the powered-off
    /// device on disk.
    public func deviceStatus() async throws -> DeviceStatus {
        do {
            return try await status().device
        } catch let error as NodeError where error.code == .notRunning {
            // Holding the device for a moment: what a killed restore left beside it goes.
            if let lock = try? NodeLock.acquire(paths) {
                Device.removeAbandonedStaging(for: paths.directory)
                lock.release()
            }
            let offline = try Device.powerOn(at: paths.directory)
            offline.powerOff()
            return try offline.status()
        }
    }

    /// The survival matrix: from the node when it runs; otherwise of a copy of the powered-off
    /// device (held meanwhile, so no node starts), powered on in this process and unlocked
    /// with `passcode`. The device itself is not even opened.
    public func survival(app: String?, passcode: String?) async throws -> SurvivalMatrix {
        do {
            return try await call(.survival, NodeAPI.SurvivalOptions(app: app, passcode: passcode))
        } catch let error as NodeError where error.code == .notRunning {
            let lock = try NodeLock.acquire(paths)
            defer { lock.release() }
            let scratch = FileManager.default.temporaryDirectory
            let copy = scratch.appendingPathComponent("keyferry-survival-\(UUID().uuidString)")
            try Device.copyAtRest(paths.directory, to: copy)
            defer { try? FileManager.default.removeItem(at: copy) }
            let device = try Device.powerOn(at: copy)
            defer { device.powerOff() }
            if try device.status().passcodeSet {
                guard let passcode else {
                    throw DeviceError(
                        .protectedDataUnavailable,
                        "\(paths.directory.path) is powered off and has a passcode, so its secrets are locked; give it with --passcode, or start and unlock its node."
                    )
                }
                try device.unlock(passcode: passcode)
            }
            return try await Survival.matrix(of: device, options: .init(app: app, passcode: passcode, scratch: scratch))
        }
    }
}
