import Foundation
import KeyferrySystem

/// The device's lock (`DeviceLayout.lock`), as a client sees it: whoever holds the device holds it
/// (`DeviceHold`), so a client that finds it free knows no node runs.
package enum NodeLock {
    /// Whether something holds the device: its node, or a command restoring or reading it.
    package static func isHeld(_ paths: NodePaths) -> Bool { ProcessLock.isHeld(paths.lock) }
}

extension NodeError {
    /// A file a node or relay needs (its lock, its log) that the system would not open.
    package init(_ failure: SystemError) { self.init(.unusablePath, "\(failure).") }
}
