import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on `node.lock`, held for the life of a node process. The kernel drops it
/// when the process dies, SIGKILL included, so a stale lock never blocks a restart.
struct NodeLock: Sendable {
    private let descriptor: Int32

    static func acquire(_ paths: NodePaths) throws -> NodeLock {
        let fd = open(paths.lock.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw NodeError.failed("cannot open \(paths.lock.path): \(String(cString: strerror(errno))).")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw NodeError.alreadyRunning(paths.directory)
        }
        return NodeLock(descriptor: fd)
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    func release() {
        close(descriptor)
    }

    /// Whether some process holds the lock right now.
    static func isHeld(_ paths: NodePaths) -> Bool {
        let fd = open(paths.lock.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(fd, LOCK_UN)
        return false
    }
}

/// Process control the launcher and the command line need, in one place.
public enum ProcessControl {
    static func isAlive(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }
    static func terminate(_ pid: Int32) { kill(pid, SIGTERM) }
    static func forceKill(_ pid: Int32) { kill(pid, SIGKILL) }
    static func detachFromTerminal() { _ = setsid() }

    /// Whether standard error is a terminal: progress is shown there, and only there.
    public static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
    /// Whether standard output is a terminal, where a secret printed alone gets a newline.
    public static var standardOutputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// A line typed at the terminal without echo, after `prompt`; nil when standard input is
    /// not a terminal (a script must say where its secret comes from).
    public static func askHidden(_ prompt: String) -> String? {
        guard isatty(STDIN_FILENO) == 1, let line = getpass(prompt) else { return nil }
        return String(cString: line)
    }
}
