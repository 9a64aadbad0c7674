import ArgumentParser
import Foundation
import KeychainModel

/// Every command's exit status, by kind of problem, the same in every command: what
/// `keyferry help exit-codes` and the README list.
enum ExitStatus: Int32, CaseIterable {
    case success = 0
    case failure = 1
    case keychain = 3
    case authentication = 4
    case notFound = 5
    case unavailable = 6
    case usage = 64
    case interrupted = 130

    init(_ kind: ProblemKind) {
        self =
            switch kind {
            case .invalidInput: .usage
            case .authentication: .authentication
            case .notFound: .notFound
            case .unavailable: .unavailable
            case .keychain: .keychain
            case .failure: .failure
            }
    }

    /// The `kind` a failure with this status carries in `--json`: `ProblemKind`'s names, and
    /// `interrupted`.
    var kind: String {
        switch self {
        case .usage: ProblemKind.invalidInput.rawValue
        default: "\(self)"
        }
    }

    /// One line each, short enough for a terminal's width beside the number.
    var meaning: String {
        switch self {
        case .success: "success, or nothing to do (already stopped, in no circle)"
        case .failure: "a failure: damaged data, the disk, Keyferry itself"
        case .keychain: "a keychain status: errSecName (-NNNNN); `status`, `name` in JSON"
        case .authentication: "a wrong or missing passcode or password, a disabled device"
        case .notFound: "not found: the device, archive, file, app or member named"
        case .unavailable: "unavailable now: no node, no relay, the device is busy"
        case .usage: "a usage mistake, or a malformed value or input file"
        case .interrupted: "interrupted (Ctrl-C or SIGTERM), after undoing what it began"
        }
    }

    /// The table, one status a line.
    static var table: String {
        allCases.map { "\(String($0.rawValue).padding(toLength: 5, withPad: " ", startingAt: 0))\($0.meaning)" }.joined(separator: "\n")
    }
}

/// `keyferry help exit-codes`: the table, as help and as output.
struct ExitCodesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exit-codes",
        abstract: "What each exit status means, the same in every command.",
        discussion: """
            \(ExitStatus.table)

            errSecAuthFailed is 4 wherever it comes from. A wrong passcode counts a failed \
            attempt on the device; from the fifth, the device waits before the next. A scenario \
            whose expectation fails is 1. With --json a failure is also one JSON object on stdout: "error" (the sentence), \
            "kind", "exitStatus", and, where they apply, "domain" and "code" (stable, for \
            programs), "status" and "name" (a keychain status), "usage", "problems" (every \
            mistake in a file) and "retryable".
            """)

    @Flag(help: "Print the table as JSON: one object per status, with its number, the kind a failure's JSON gives it, and its meaning.")
    var json = false

    func run() throws {
        guard json else { return print(ExitStatus.table) }
        try printJSON(encodable: ExitStatus.allCases.map { Row(status: $0.rawValue, kind: $0.kind, meaning: $0.meaning) })
    }

    private struct Row: Encodable {
        var status: Int32
        var kind: String
        var meaning: String
    }
}
