import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive lock on a file, held for the life of a process: a node's `node.lock`, a
/// relay's `relay.lock`. The kernel drops it when the process dies, SIGKILL included, so a
/// stale lock never blocks a restart, and a held one proves its process is alive (a pid
/// file alone could name another process after the pid is reused).
public struct ProcessLock: Sendable {
    private let descriptor: Int32

    /// The lock, or nil when another process holds it.
    package static func acquire(_ file: URL) throws -> ProcessLock? {
        let fd = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw NodeError(.unusablePath, "cannot open \(file.path): \(String(cString: strerror(errno))).")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        return ProcessLock(descriptor: fd)
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    public func release() {
        close(descriptor)
    }

    /// Whether some process holds the lock right now.
    package static func isHeld(_ file: URL) -> Bool {
        let fd = open(file.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(fd, LOCK_UN)
        return false
    }
}

/// A node's lock, `node.lock` in its device directory: a second start of the device fails on it.
package enum NodeLock {
    package static func acquire(_ paths: NodePaths) throws -> ProcessLock {
        guard let lock = try ProcessLock.acquire(paths.lock) else { throw NodeError.alreadyRunning(paths.directory) }
        return lock
    }

    package static func isHeld(_ paths: NodePaths) -> Bool { ProcessLock.isHeld(paths.lock) }
}
