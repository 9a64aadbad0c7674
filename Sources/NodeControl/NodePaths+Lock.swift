import Foundation
import KeychainModel
package import KeyferrySystem

extension NodePaths {
    /// Whether something holds the device (its lock, `DeviceLayout.lock`): its node, or a
    /// command restoring or reading it (`DeviceHold`). A client that finds it free knows no
    /// node runs.
    package var isHeld: Bool { ProcessLock.isHeld(lock) }
}

extension NodeError {
    /// A file a node or relay needs (its lock, its log) that the system would not open.
    package init(_ failure: SystemError) { self.init(.unusablePath, "\(failure).") }
}
