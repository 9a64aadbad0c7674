public import ArgumentParser
import Foundation
public import KeychainModel
import KeychainStore
import KeyferrySystem
import KeyferryThreads
import NodeControl

/// The device directory argument every device, node, app and item command takes.
struct DeviceDirectory: ParsableArguments {
    @Argument(help: "The device's directory.", completion: .directory)
    var dir: String

    var url: URL { URL(fileURLWithPath: dir) }
    var client: NodeClient { NodeClient(directory: url) }
}

/// How much a command prints, the same flags on every command.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print the result as JSON on stdout.") var json = false
    @Flag(name: .shortAndLong, help: "Print only results and errors: no confirmations, summaries or progress.") var quiet = false

    func validate() throws {
        Verbosity.current = json || quiet ? .quiet : .normal
    }
}

/// The output flags of a command that reports item by item (restore, transfer): `--verbose`
/// lists every item, where the others print a summary.
/// (A group of its own rather than one nesting `OutputOptions`, so that one `validate` sets the
/// verbosity.)
struct ReportOptions: ParsableArguments {
    @Flag(help: "Print the result as JSON on stdout.") var json = false
    @Flag(name: .shortAndLong, help: "Print only results and errors: no confirmations, summaries or progress.") var quiet = false
    @Flag(name: .shortAndLong, help: "List every item, with what happened to it and why.") var verbose = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("choose --quiet or --verbose, not both.") }
        Verbosity.current = json || quiet ? .quiet : verbose ? .verbose : .normal
    }
}

/// How much this run prints, set once while its options are parsed.
enum Verbosity: Int, Sendable, Comparable {
    case quiet, normal, verbose

    private static let level = Locked(Verbosity.normal)
    static var current: Verbosity {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
    }

    static func < (a: Verbosity, b: Verbosity) -> Bool { a.rawValue < b.rawValue }
}

/// A confirmation or a summary on stdout (`created`, `stopped`, `wrote ...`): left out with
/// --quiet and --json, where only results are printed.
func say(_ line: String) {
    guard Verbosity.current >= .normal else { return }
    // Confirmations quote names from outside (a device's, a file's): never raw control bytes.
    printNow(line.escapingControlCharactersButNewlines)
}

/// A warning: on stderr, never mixed into results, and shown even with --quiet.
func warn(_ line: String) {
    printError("warning: \(line.escapingControlCharactersButNewlines)")
}

/// Warns, once per command however many it takes, that a passcode was given on the command
/// line, where every user of the machine can read it (`ps`, /proc/PID/cmdline).
func warnPasscodeInArgv(_ option: String, instead: String) {
    let first = passcodeInArgvWarned.withLock { warned in
        let first = !warned
        warned = true
        return first
    }
    guard first else { return }
    warn("\(option) puts the passcode on the command line, where every user of this machine can read it; prefer \(instead).")
}

private let passcodeInArgvWarned = Locked(false)

/// A failure the command line words itself: a sentence naming the fix, and its kind (a failure,
/// exit status 1, unless said).
struct CommandFailure: Error, CustomStringConvertible {
    let kind: ProblemKind
    let description: String
    init(_ kind: ProblemKind, _ description: String) {
        self.kind = kind
        self.description = description
    }
    init(_ description: String) { self.init(.failure, description) }
}

/// A line on stdout at once, even into a pipe: progress a CI log shows as it happens.
func printNow(_ line: String) {
    print(line)
    ProcessControl.flushPrinted()
}

/// A line of progress on stderr, drawn over itself: only on a terminal, and neither with
/// --quiet nor --json.
struct ProgressLine: Sendable {
    let isShown: Bool

    init() { isShown = Verbosity.current >= .normal && ProcessControl.standardErrorIsTerminal }

    /// Draws `text` over the line; `last` ends the line there.
    func show(_ text: String, last: Bool = false) {
        if isShown { printError(Self.erase + text, newline: last) }
    }

    /// Wipes the line, so that what comes next starts at the left.
    func clear() {
        if isShown { printError(Self.erase, newline: false) }
    }

    private static let erase = "\u{1B}[2K\r"
}

/// Runs `body` in a task that SIGINT or SIGTERM cancels, instead of killing the process, so
/// that the work can undo what it did; a signal that comes before the task exists counts too.
/// A body that fails once interrupted fails with `Interrupted` (exit status 130).
func interruptibly<Success: Sendable>(_ body: @escaping @Sendable () async throws -> Success) async throws -> Success {
    let state = Locked<(requested: Bool, task: Task<Success, any Error>?)>((false, nil))
    let handler = ProcessControl.onInterrupt {
        state.withLock {
            $0.requested = true
            $0.task?.cancel()
        }
    }
    defer { withExtendedLifetime(handler) {} }
    let task = Task { try await body() }
    state.withLock { state in
        state.task = task
        if state.requested { task.cancel() }
    }
    do {
        return try await task.value
    } catch {
        guard state.withLock({ $0.requested }) else { throw error }
        throw Interrupted(cause: error)
    }
}

/// Work stopped by SIGINT or SIGTERM, after undoing what it could; `cause` says what was undone
/// when the work says more than that it was cancelled.
struct Interrupted: Error, CustomStringConvertible {
    var cause: any Error
    var description: String {
        guard !(cause is CancellationError) else { return "interrupted" }
        // A cause that already says it was interrupted is not said twice.
        let why = userMessage(for: cause).message
        return why.hasPrefix("interrupted") ? why : "interrupted: \(why)"
    }
}

/// A line on stderr, after whatever stdout holds, so that the two read in order in one log.
func printError(_ line: String, newline: Bool = true) {
    ProcessControl.flushPrinted()
    FileHandle.standardError.write(Data((line + (newline ? "\n" : "")).utf8))
}

/// Pretty, key-sorted JSON of plain values (dictionaries, arrays, strings, numbers, booleans).
func printJSON(_ value: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data("null".utf8)
    print(String(decoding: data, as: UTF8.self))
}

/// Encodable values printed the same way.
func printJSON(encodable value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// Classes and protection classes are written as Apple names them without prefix
/// (`genericPassword`, `whenUnlocked`; any case), and read in Apple's other spellings too: the
/// short code Apple stores (`genp`, `ak`) and the constant (`kSecClassGenericPassword`). Output
/// always uses the name without prefix.
extension AppleNamed where Self: ExpressibleByArgument {
    init?(spelling: String) {
        guard let match = Self.allCases.first(where: { $0.name.lowercased() == spelling.lowercased() }) ?? Self(name: spelling) else { return nil }
        self = match
    }
}

// (No per-value descriptions: the help names the values in its sentence, and ArgumentParser
// would list each with an empty one.)
extension ProtectionClass: ExpressibleByArgument {
    public init?(argument: String) { self.init(spelling: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { name }
}

extension ItemClass: ExpressibleByArgument {
    public init?(argument: String) { self.init(spelling: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
    public static var allValueDescriptions: [String: String] { [:] }
    public var defaultValueDescription: String { name }
}

/// A secret given on the command line, from a file, or from standard input.
struct SecretInput: ParsableArguments {
    @Option(help: "The secret as text (visible in the process list; for tests). Prefer --value-file or --value-stdin.")
    var value: String?
    @Option(help: "Read the secret, byte for byte, from this file.", completion: .file())
    var valueFile: String?
    @Flag(help: "Read the secret, byte for byte, from standard input.")
    var valueStdin = false

    var given: Int { [value != nil, valueFile != nil, valueStdin].filter { $0 }.count }

    func validate() throws {
        guard given <= 1 else { throw ValidationError("give the secret once: --value, --value-file or --value-stdin.") }
    }

    /// nil when none was given.
    func read() throws -> Data? { try readSecret(text: value, file: valueFile, stdin: valueStdin) }
}

/// A device passcode: in argv (where every local user sees it: for tests), from a file's first
/// line, or from standard input's first line; `device unlock` asks on a terminal.
struct PasscodeInput: ParsableArguments {
    @Option(
        help:
            "The passcode of the device the command works on; for restore and transfer, the target's (visible in the process list; prefer --passcode-file or --passcode-stdin).",
        transform: Checked.passcode)
    var passcode: String?
    @Option(help: "Read the device passcode from this file's first line.", completion: .file())
    var passcodeFile: String?
    @Flag(help: "Read the device passcode from standard input's first line.")
    var passcodeStdin = false

    var given: Bool { passcode != nil || passcodeFile != nil || passcodeStdin }

    func validate() throws {
        guard [passcode != nil, passcodeFile != nil, passcodeStdin].filter({ $0 }).count <= 1 else {
            throw ValidationError("give the passcode once: --passcode, --passcode-file or --passcode-stdin.")
        }
    }

    /// The passcode given, nil when none was.
    func read() throws -> String? {
        if let passcode {
            warnPasscodeInArgv("--passcode", instead: "--passcode-file F or --passcode-stdin")
            return passcode
        }
        guard passcodeFile != nil || passcodeStdin else { return nil }
        return try Self.read(file: passcodeFile)
    }

    /// The first line of `file` (standard input when nil), checked as a passcode typed in argv is.
    static func read(file: String?, what: String = "passcode") throws -> String {
        let source = file == nil ? "the \(what) on standard input" : "the \(what) file"
        let line = firstLine(of: try readInput(file, what: source, limit: 4 << 10))
        guard !line.isEmpty else { throw ValidationError("\(source)\(file.map { " \($0)" } ?? "") is empty; its first line is the \(what).") }
        return try Checked.passcode(line)
    }

    /// The target's passcode for a restore or transfer (`verb`), asked for before any work when
    /// the target has one and none was given: the node would refuse it only after the source's
    /// side of the work.
    func readForTarget(_ target: String, verb: String) throws -> String? {
        let passcode = try read()
        if passcode == nil, let status = try? Device.status(at: URL(fileURLWithPath: target)), status.passcodeSet {
            throw KeychainError(
                .authFailed, "\(target) has a passcode; give it with --passcode-file F, --passcode-stdin or --passcode to \(verb) onto it.")
        }
        return passcode
    }

    /// The passcode given, or typed at a prompt when standard input is a terminal.
    func readOrAsk(_ prompt: String) throws -> String? {
        if given { return try read() }
        return Self.ask(prompt)
    }

    /// A passcode typed, unechoed, at a prompt on the terminal; nil without one, or when empty.
    static func ask(_ prompt: String) -> String? {
        ProcessControl.askHidden(prompt).flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The first line of a secret's file, as passwords and passcodes are given: what follows a
/// newline is not part of it.
func firstLine(of data: Data) -> String {
    String(decoding: data, as: UTF8.self).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
}

/// A secret from exactly one of: text, a file, standard input. nil when none was given.
func readSecret(text: String?, file: String?, stdin: Bool) throws -> Data? {
    let secret: Data
    if let text {
        secret = Data(text.utf8)
    } else if let file {
        secret = try readInput(file, what: "the secret file", limit: NewItem.maximumDataBytes)
    } else if stdin {
        secret = try readInput(nil, what: "the secret on standard input", limit: NewItem.maximumDataBytes)
    } else {
        return nil
    }
    let limit = NewItem.maximumDataBytes
    if secret.count > limit {
        // Only `limit + 1` bytes were read: a file says its size, a stream only that it is more.
        let size = file.flatMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int }.flatMap { $0 > limit ? $0 : nil }
        throw KeychainError(
            .dataTooLarge, "the secret is \(size.map(byteSize) ?? "more than \(byteSize(limit))"); a Keyferry item holds up to \(byteSize(limit)).")
    }
    return secret
}

/// Reads a file, or standard input when `path` is nil, whole: a regular file, a pipe,
/// `<(command)` or `/dev/stdin` alike, as CI secrets arrive. At most `limit` bytes are kept,
/// plus one so that "too large" is seen. A missing file is not found (5), as every file a
/// command names; a directory is a usage mistake (64); one that cannot be read, a failure (1).
func readInput(_ path: String?, what: String, limit: Int) throws -> Data {
    let handle: FileHandle
    if let path {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CommandFailure(.notFound, "cannot read \(what) \(path): there is no such file.")
        }
        guard !isDirectory.boolValue else { throw CommandFailure(.invalidInput, "cannot read \(what) \(path): it is a directory.") }
        guard let opened = FileHandle(forReadingAtPath: path) else {
            throw CommandFailure("cannot read \(what) \(path): permission denied.")
        }
        handle = opened
    } else {
        handle = FileHandle.standardInput
    }
    defer { if path != nil { try? handle.close() } }
    do {
        return try handle.read(upToCount: limit + 1) ?? Data()
    } catch {
        throw CommandFailure("cannot read \(what)\(path.map { " " + $0 } ?? ""): \(userMessage(for: error).message)")
    }
}

extension Int {
    /// `1 item`, `3 items`.
    var items: String { items(as: "item") }

    /// `1 app`, `3 apps`: the count and the noun, plural when it is not one.
    func items(as noun: String) -> String { self == 1 ? "1 \(noun)" : "\(self) \(noun)s" }
}

extension String {
    /// Padded with spaces to `width`, for columns.
    func padded(_ width: Int) -> String {
        count >= width ? self : padding(toLength: width, withPad: " ", startingAt: 0)
    }
}
