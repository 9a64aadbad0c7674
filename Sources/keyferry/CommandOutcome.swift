import ArgumentParser
import Fleet
import Foundation
import KeychainModel
import KeyferrySystem

/// How a failed command ends, the same for every command: the exit status of its kind of
/// problem (`ExitStatus`), the sentence on stderr (`errSecName (-NNNNN): sentence` for a keychain
/// status, the usage line for a usage mistake, the remedy where the command line knows one), and
/// with `--json` one JSON object on stdout too, so a consumer never reads nothing.
struct CommandOutcome {
    var status: Int32
    var text: String
    var json: [String: Any]?

    init(_ error: any Error, command: any ParsableCommand.Type, json: Bool) {
        switch error {
        case let exit as ExitCode:
            self.init(status: exit.rawValue, text: "", json: nil)
        case let interrupted as Interrupted:
            self.init(
                .interrupted, "error: \(interrupted)", json: json,
                ["error": interrupted.description, "interrupted": true, "kind": ExitStatus.interrupted.kind])
        case let error as ValidationError:
            let usage = Keyferry.usageString(for: command)
            self.init(
                .usage, "error: \(error.message)\nUsage: \(usage)\n  See '\(commandPath(usage)) --help' for more.",
                json: json, ["error": error.message, "usage": usage])
        case let errors as FleetFileErrors:
            self.init(FileProblems(errors: errors.errors), command: command, json: json)
        case let problems as FileProblems:
            let sentences = problems.errors.map { $0.description }
            self.init(
                ExitStatus(problems.kind), sentences.map { "error: \($0)" }.joined(separator: "\n"), json: json,
                ["error": sentences.first ?? "", "problems": sentences, "domain": FleetFileError.domain], kind: problems.kind)
        case let error as any CodedError:
            let sentence = Remedy.sentence(for: error)
            var fields: [String: Any] = ["error": sentence, "domain": error.domain, "code": error.codeName, "retryable": error.isRetryable]
            var text = "error: \(sentence)"
            if let error = error as? KeychainError {
                fields["status"] = Int(error.status.rawValue)
                fields["name"] = error.status.name
                fields["message"] = error.message
                text = "\(error.status): \(sentence)"
            }
            self.init(ExitStatus(error.kind), text, json: json, fields, kind: error.kind)
        case let failure as CommandFailure:
            self.init(ExitStatus(failure.kind), "error: \(failure.description)", json: json, ["error": failure.description], kind: failure.kind)
        default:
            let (message, kind) = userMessage(for: error)
            self.init(ExitStatus(kind), "error: \(message)", json: json, ["error": message], kind: kind)
        }
    }

    private init(_ status: ExitStatus, _ text: String, json: Bool, _ fields: [String: Any], kind: ProblemKind? = nil) {
        var fields = fields
        fields["exitStatus"] = Int(status.rawValue)
        if let kind { fields["kind"] = kind.rawValue }
        self.init(status: status.rawValue, text: text, json: json ? fields : nil)
    }

    private init(status: Int32, text: String, json: [String: Any]?) {
        self.status = status
        self.text = text
        self.json = json
    }

    /// A mistake ArgumentParser found while parsing, with "did you mean" for a mistyped
    /// subcommand.
    static func usage(parsing error: any Error, arguments: [String], json: Bool) -> CommandOutcome {
        if let typo = SubcommandTypo.find(in: arguments) { return .typo(typo, json: json) }
        var text = Keyferry.fullMessage(for: error)
        var message = Keyferry.message(for: error)
        if let range = text.range(of: "Error: "), text[..<range.lowerBound].allSatisfy(\.isWhitespace) {
            text = "error: " + text[range.upperBound...]
        }
        if let guess = Self.closestValue(in: message) {
            let suggested = guess.sentence + " Did you mean '\(guess.value)'?"
            text = text.replacingOccurrences(of: guess.sentence, with: suggested)
            message = message.replacingOccurrences(of: guess.sentence, with: suggested)
        }
        let command = SubcommandTypo.deepest(in: arguments)
        let usage = Keyferry.usageString(for: command)
        if let renamed = OptionTypo.find(in: arguments, message: message, command: command) {
            message = renamed.sentence
            text = "error: \(message)\nUsage: \(usage)\n  See '\(commandPath(usage)) --help' for more."
        }
        return CommandOutcome(
            status: Keyferry.exitCode(for: error).rawValue, text: text,
            json: json
                ? [
                    "error": message, "kind": ProblemKind.invalidInput.rawValue, "exitStatus": Int(Keyferry.exitCode(for: error).rawValue),
                    "usage": usage,
                ]
                : nil)
    }

    /// For a value outside an option's list, the listed value closest to it, and the sentence
    /// that refused it: options and subcommands get "did you mean", and so do values.
    private static func closestValue(in message: String) -> (sentence: String, value: String)? {
        guard let refusal = message.firstMatch(of: /The value '([^']*)' is invalid for '[^']*'\./) else { return nil }
        let listed = message[refusal.range.upperBound...]
        let candidates = listed.matches(of: /(?m)^\s*- (\S+)$|'([^']+)'/).compactMap { ($0.1 ?? $0.2).map(String.init) }
        guard let value = Spelling.closest(to: String(refusal.1), among: candidates) else { return nil }
        return (String(message[refusal.range]), value)
    }

    /// A word where a subcommand belongs that names none.
    static func typo(_ typo: SubcommandTypo, json: Bool) -> CommandOutcome {
        CommandOutcome(.usage, "error: \(typo.message)\n  See '\(typo.parentPath) --help'.", json: json, ["error": typo.message], kind: .invalidInput)
    }

    /// Paths under the working directory as a user types them, relative: the devices and
    /// files a command names reach its errors as absolute paths. (`--json` keeps them whole.)
    static func asTyped(_ text: String) -> String {
        let here = FileManager.default.currentDirectoryPath
        guard here.count > 1 else { return text }
        return text.replacingOccurrences(of: here + "/", with: "")
    }

    func finish() -> Never {
        // A message may quote a relay or an archive: its lines are kept, any other control
        // character is escaped, so none reaches the terminal as such.
        if !text.isEmpty {
            printError(Self.asTyped(text).escapingControlCharactersButNewlines)
        }
        if let json { printJSON(json) }
        exit(status)
    }
}

/// Every mistake found in the files a command was given (fleet and scenario files are checked
/// whole before anything starts), reported together.
struct FileProblems: Error {
    var errors: [FleetFileError]
    /// Not found only when every file is missing; any malformed one makes it a usage mistake.
    var kind: ProblemKind { errors.allSatisfy { $0.kind == .notFound } ? .notFound : .invalidInput }
}

/// `keyferry item add` from the usage line `keyferry item add <dir> --app <app> ...`.
private func commandPath(_ usage: String) -> String {
    usage.split(separator: " ").prefix { !$0.hasPrefix("<") && !$0.hasPrefix("[") && !$0.hasPrefix("-") }.joined(separator: " ")
}

/// A word where a subcommand belongs that names none: `keyferry itme list`, `keyferry item rm`.
struct SubcommandTypo {
    var word: String
    var parentPath: String
    var candidates: [String]

    /// The command the leading words of `arguments` name, as far as they name one.
    static func deepest(in arguments: [String]) -> any ParsableCommand.Type {
        var command: any ParsableCommand.Type = Keyferry.self
        for argument in arguments {
            let subcommands = configuration(of: command).subcommands
            guard let next = subcommands.first(where: { configuration(of: $0).commandName == argument }) else { break }
            command = next
        }
        return command
    }

    /// The first word that should name a subcommand and does not, or nil.
    static func find(in arguments: [String]) -> SubcommandTypo? {
        var command: any ParsableCommand.Type = Keyferry.self
        var path = ["keyferry"]
        for argument in arguments {
            let subcommands = configuration(of: command).subcommands
            guard !subcommands.isEmpty, !argument.hasPrefix("-") else { return nil }
            let names = subcommands.map { configuration(of: $0) }
            guard let index = names.firstIndex(where: { $0.commandName == argument || $0.aliases.contains(argument) }) else {
                let candidates = names.filter(\.shouldDisplay).compactMap(\.commandName)
                return SubcommandTypo(word: argument, parentPath: path.joined(separator: " "), candidates: candidates)
            }
            command = subcommands[index]
            path.append(argument)
        }
        return nil
    }

    var message: String {
        let known = "\(parentPath) has \(candidates.joined(separator: ", "))"
        guard
            let guess = Self.synonyms[word.lowercased()].flatMap({ candidates.contains($0) ? $0 : nil })
                ?? Spelling.closest(to: word, among: candidates)
        else { return "'\(word)' is not a subcommand; \(known)." }
        return "'\(word)' is not a subcommand; did you mean '\(guess)'? (\(known))"
    }

    /// What people type from other tools.
    private static let synonyms = [
        "rm": "delete", "remove": "delete", "del": "delete", "ls": "list", "show": "get", "read": "get",
        "set": "update", "edit": "update", "new": "add", "create": "init", "start": "up", "stop": "down",
        "info": "status", "restart": "reboot", "ps": "status",
    ]

    /// Opened generically: reading a static property through an existential metatype crashes
    /// this compiler.
    private static func configuration<Command: ParsableCommand>(of command: Command.Type) -> CommandConfiguration {
        Command.configuration
    }
}

/// The sentence a user reads for a failure that is not Keyferry's own (no Foundation or NIO
/// type names or debug text), and its kind.
func userMessage(for error: any Error) -> (message: String, kind: ProblemKind) {
    switch error {
    case let error as CocoaError:
        let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? error.filePath ?? error.url?.path
        let subject = path.map { " (\($0))" } ?? ""
        switch error.code {
        case .fileNoSuchFile, .fileReadNoSuchFile: return ("no such file or directory\(subject).", .notFound)
        case .fileReadNoPermission, .fileWriteNoPermission: return ("permission denied\(subject).", .failure)
        case .fileWriteOutOfSpace: return ("the disk is full\(subject).", .failure)
        case .fileWriteVolumeReadOnly: return ("the file system is read-only\(subject).", .failure)
        case .fileWriteFileExists: return ("it already exists\(subject).", .invalidInput)
        default: return ("a file operation failed\(subject): code \(error.code.rawValue).", .failure)
        }
    case let error as POSIXError:
        return (SystemError.reason(error.code.rawValue) + ".", error.code == .ENOENT ? .notFound : .failure)
    case let error as any CodedError:
        return (error.message, error.kind)
    case let error as FleetError:
        return (error.description, error.kind)
    default:
        return ("\(error)", .failure)
    }
}

/// An option typed as another command spells it: `--bundle` where `--app` is meant, `--value`
/// in an update, whose options are `--set-value` and the like. ArgumentParser's guess goes by
/// spelling alone (`--value` → `--all`), and a required `--app` missing is reported before an
/// unknown `--bundle`.
struct OptionTypo {
    var typed: String
    var meant: String

    static func find(in arguments: [String], message: String, command: any ParsableCommand.Type) -> OptionTypo? {
        let typed: String
        if let match = message.firstMatch(of: /Unknown option '(--[A-Za-z-]+)'/) {
            typed = String(match.1)
        } else if arguments.contains(where: { $0 == "--bundle" || $0.hasPrefix("--bundle=") }) {
            typed = "--bundle"
        } else {
            return nil
        }
        let help = Keyferry.helpMessage(for: command)
        let candidate = typed == "--bundle" ? "--app" : "--set-" + typed.dropFirst(2)
        guard help.contains(candidate + " ") else { return nil }
        return OptionTypo(typed: typed, meant: candidate)
    }

    var sentence: String { "Unknown option '\(typed)'. Did you mean '\(meant)'?" }
}
