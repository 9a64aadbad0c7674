import ArgumentParser
import Testing

@testable import keyferry

/// The command line's parsing and validation, in process: no binary, no device. What reaches a
/// device is tested end to end (BadInputTests).
@Suite("keyferry argument parsing, in process")
struct ArgumentParsingTests {
    private let dir = "/nonexistent/phone"
    private let app = ["--app", "com.example.mail"]

    @Test("usage errors are the parser's: exit 64 and a sentence naming the bad argument")
    func usageErrors() {
        let cases: [([String], String)] = [
            (["item", "add", dir] + app + ["--class", "sword", "--value", "x"], "sword"),
            (["item", "add", dir] + app + ["--account", "a", "--value", "x", "--value-stdin"], "once"),
            (["item", "get", dir] + app + ["--limit", "several"], "limit"),
            (["item", "get", dir] + app + ["--sync", "maybe"], "sync"),
            (["device", "passcode", dir, "--set", "1", "--remove"], "exactly one"),
            (["device", "init", dir, "--biometry"], "passcode"),
            (["bench", "store"], "bench"),
            (["item", "get"], "<dir>"),
        ]
        for (arguments, mention) in cases {
            let line = arguments.joined(separator: " ")
            do {
                _ = try Keyferry.parseAsRoot(arguments)
                Issue.record("\(line) parsed")
            } catch {
                #expect(Keyferry.exitCode(for: error).rawValue == 64, "\(line)")
                #expect(Keyferry.message(for: error).contains(mention), "\(line): \(Keyferry.message(for: error))")
            }
        }
    }

    @Test("a well-formed command parses into its own type")
    func wellFormed() throws {
        let command = try Keyferry.parseAsRoot(["item", "get", dir] + app + ["--account", "alice", "--json"])
        #expect(String(describing: type(of: command)).contains("Get"))
        #expect(throws: Never.self) { try Keyferry.parseAsRoot(["backup", "verify", "/tmp/a.kfbackup"]) }
    }
}
