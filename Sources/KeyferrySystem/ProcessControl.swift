import CProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Processes, signals and the terminal, as the launchers and the command line need them.
package enum ProcessControl {
    /// The signals Keyferry sends.
    package enum Signal: Sendable {
        /// Ask to stop (SIGTERM), as `node stop` does first.
        case terminate
        /// Ctrl-C (SIGINT).
        case interrupt
        /// Stop at once, with no chance to clean up (SIGKILL).
        case kill
        /// Freeze, and thaw (SIGSTOP, SIGCONT): a process that stops answering.
        case stop, resume

        var number: Int32 {
            switch self {
            case .terminate: SIGTERM
            case .interrupt: SIGINT
            case .kill: SIGKILL
            case .stop: SIGSTOP
            case .resume: SIGCONT
            }
        }
    }

    /// Sends `signal` to the process `pid`; false when there is no such process to signal.
    @discardableResult
    package static func send(_ signal: Signal, to pid: Int32) -> Bool { pid > 0 && kill(pid, signal.number) == 0 }

    /// This process's ID.
    package static var currentID: Int32 { getpid() }

    package static func isAlive(_ pid: Int32) -> Bool { pid > 0 && (kill(pid, 0) == 0 || errno == EPERM) }

    /// Whether `pid` still runs: alive and not a zombie waiting for its parent (a daemon's parent
    /// may never wait for it). Read from `/proc/PID/stat`, whose third field is the state.
    package static func isExecuting(_ pid: Int32) -> Bool {
        guard isAlive(pid), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(after: end)...].drop { $0 == " " }.first
        return state != "Z" && state != "X"
    }

    /// Leaves the terminal's session, so a Ctrl-C there no longer reaches this process.
    package static func detachFromTerminal() { _ = setsid() }

    /// Makes every file and directory this process creates its owner's alone.
    package static func restrictNewFilesToOwner() { umask(0o077) }

    /// Keeps this process's memory (class keys, secrets in buffers) out of core files and away
    /// from other processes of the same user: no core dump (`RLIMIT_CORE` 0, inherited by
    /// children) and not dumpable, so neither ptrace nor `/proc/PID/mem` nor a crash backtracer
    /// can read it. A crash then reports only the runtime's fatal error message.
    package static func keepMemoryPrivate() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        _ = keyferry_forbid_dumping()
    }

    /// Whether standard error is a terminal: progress is shown there, and only there.
    package static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
    /// Whether standard output is a terminal, where a secret printed alone gets a newline.
    package static var standardOutputIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// Writes out what `print` holds in its buffer, so it comes before whatever is written next
    /// (a line on standard error, or into a pipe whose reader is waiting for it).
    package static func flushPrinted() { fflush(nil) }

    /// A line typed at the terminal without echo, after `prompt`; nil when standard input is
    /// not a terminal (a script must say where its secret comes from).
    package static func askHidden(_ prompt: String) -> String? {
        guard isatty(STDIN_FILENO) == 1, let line = getpass(prompt) else { return nil }
        return String(cString: line)
    }
}
