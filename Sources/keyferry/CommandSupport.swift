import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Node

/// Exit statuses every command keeps: 0 success, 3 a keychain status other than success,
/// 64 a usage error (ArgumentParser's own), 1 anything else.
enum Exit {
    static let keychainStatus = ExitCode(3)
    static let failure = ExitCode(1)
}

/// The device directory argument every device, node, app and item command takes.
struct DeviceDirectory: ParsableArguments {
    @Argument(help: "The device directory (made by `keyferry device init`).", completion: .directory)
    var dir: String

    var url: URL { URL(fileURLWithPath: dir) }
    var client: NodeClient { NodeClient(directory: url) }
}

struct JSONFlag: ParsableArguments {
    @Flag(help: "Print the result as JSON on stdout.") var json = false
}

/// Runs a command body and turns its failure into the documented output and exit status:
/// `errSecName (-NNNNN): sentence` on stderr and status 3 for a keychain status (with
/// `--json`, the same as an object on stdout); a sentence naming the fix and status 1 for
/// anything else.
func reporting(json: Bool, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
    } catch let error as ValidationError {
        throw error
    } catch let error as KeychainError {
        printError(error.description)
        if json { printJSON(["status": Int(error.status.rawValue), "name": error.status.name, "message": error.message]) }
        throw Exit.keychainStatus
    } catch {
        let message = "\(error)"
        printError("error: \(message)")
        if json { printJSON(["error": message]) }
        throw Exit.failure
    }
}

/// A failure that is only a sentence naming the fix (exit status 1).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func printError(_ line: String, newline: Bool = true) {
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

extension ProtectionClass: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
}

extension ItemClass: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
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

/// A secret from exactly one of: text, a file, standard input. nil when none was given.
func readSecret(text: String?, file: String?, stdin: Bool) throws -> Data? {
    if let text { return Data(text.utf8) }
    if let file {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("cannot read the secret file \(file).")
        }
        return data
    }
    if stdin { return FileHandle.standardInput.readDataToEndOfFile() }
    return nil
}

extension String {
    /// Padded with spaces to `width`, for columns.
    func padded(_ width: Int) -> String {
        count >= width ? self : padding(toLength: width, withPad: " ", startingAt: 0)
    }
}
