import Foundation
import KeyferrySystem

/// A node's lock, `node.lock` in its device directory: a second start of the device fails on it.
package enum NodeLock {
    package static func acquire(_ paths: NodePaths) throws -> ProcessLock {
        let lock: ProcessLock?
        do {
            lock = try ProcessLock.acquire(paths.lock)
        } catch {
            throw NodeError(error)
        }
        guard let lock else { throw NodeError.alreadyRunning(paths.directory) }
        return lock
    }

    package static func isHeld(_ paths: NodePaths) -> Bool { ProcessLock.isHeld(paths.lock) }
}

extension NodeError {
    /// A file a node or relay needs (its lock, its log) that the system would not open.
    package init(_ failure: SystemError) { self.init(.unusablePath, "\(failure).") }
}
