import Foundation
import KeychainStore
import KeyferrySystem
import NodeControl

/// A device powered on in this process rather than by a node, such as for Keychain Services
/// calls of a test. Its node lock is held until `powerOff`, so no node starts on it meanwhile.
final class LocalDevice: Sendable {
    let device: Device
    private let lock: ProcessLock

    /// Fails with `NodeError.alreadyRunning` when a node runs the device: talk to it instead.
    init(directory: URL) throws {
        let paths = NodePaths(directory: directory)
        try Device.requireDevice(at: paths.directory)
        lock = try NodeLock.acquire(paths)
        do {
            device = try Device.powerOn(at: paths.directory)
        } catch {
            lock.release()
            throw error
        }
    }

    func powerOff() {
        device.powerOff()
        lock.release()
    }
}
