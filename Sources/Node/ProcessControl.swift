import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
