import Foundation
import KeyferrySystem

/// A node's lock, `node.lock` in its device directory: a second start of the device fails on it.
package enum NodeLock {
    package static func acquire(_ paths: NodePaths) throws -> ProcessLock {
        let lock: ProcessLock?
        do {
            lock = try ProcessLock.acquire(paths.lock)
        } catch {
            throw NodeError(.unusablePath, "\(error).")
        }
        guard let lock else { throw NodeError.alreadyRunning(paths.directory) }
        return lock
    }

    package static func isHeld(_ paths: NodePaths) -> Bool { ProcessLock.isHeld(paths.lock) }
}
