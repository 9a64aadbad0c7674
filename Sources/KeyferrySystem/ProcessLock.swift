package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive lock on a file, held for the life of a process: a node's `node.lock`, a
/// relay's `relay.lock`. The kernel drops it when the process dies, SIGKILL included, so a
/// stale lock never blocks a restart, and a held one proves its process is alive (a pid
/// file alone could name another process after the pid is reused).
package struct ProcessLock: Sendable {
    private let descriptor: Int32

    /// The lock, or nil when another process holds it; throws when the file cannot be opened.
    package static func acquire(_ file: URL) throws(SystemError) -> ProcessLock? {
        let fd = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .last("cannot open \(file.path)") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        return ProcessLock(descriptor: fd)
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    package func release() {
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
