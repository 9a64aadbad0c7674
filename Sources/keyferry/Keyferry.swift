import ArgumentParser
import Foundation
import KeyferrySystem

/// Every command names itself (`commandName:`): otherwise ArgumentParser derives each name
/// through `String(describing:)`, whose dynamic casts scan every protocol conformance in this
/// large binary, and that was half of a short command's start-up.
@main
struct Keyferry: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "keyferry",
        abstract: "Simulated Apple devices with real, encrypted keychains.",
        discussion: """
            Keyferry runs simulated iPhones and iPads on Linux. Each device keeps an encrypted keychain \
            that behaves like the one on a phone: protection classes, lock states, passcode and biometry, \
            access groups, app installs. Watch it with `keyferry demo` (from the repository), bring up \
            a fleet with `keyferry fleet up FLEET.yaml`, or drive one device by hand:

            $ keyferry device init ./phone --passcode 123456
            $ keyferry node start ./phone
            $ keyferry device unlock ./phone --passcode 123456
            $ keyferry app install ./phone --app com.example.mail --team ABCDE12345
            $ printf s3cret | keyferry item add ./phone \\
                --app com.example.mail --account alice --value-stdin
            $ keyferry item get ./phone --app com.example.mail --account alice
            $ keyferry node stop ./phone

            Exit status, the same in every command (`keyferry help exit-codes` says more): 0 success \
            or nothing to do; 1 a failure; 3 a keychain status (errSecName (-NNNNN) on stderr); 4 a \
            wrong or missing passcode or password; 5 not found; 6 unavailable now (no node, no \
            relay); 64 a usage mistake or malformed input; 130 interrupted. With --json, a failure \
            is one JSON object on stdout too.

            Shell completion: keyferry --generate-completion-script bash|zsh|fish
            """,
        version: "keyferry \(version) (\(buildDescription))",
        subcommands: [
            DeviceCommand.self, NodeCommand.self, AppCommand.self, ItemCommand.self, FleetCommand.self, BackupCommand.self, RestoreCommand.self,
            TransferCommand.self, SurvivalCommand.self, ScenarioCommand.self, AuditCommand.self, LintCommand.self, CircleCommand.self, SyncCommand.self,
            RelayCommand.self,
            KeyCommand.self, DemoCommand.self, ExitCodesCommand.self,
        ])

    private static var buildDescription: String {
        #if DEBUG
            let kind = "debug build"
        #else
            let kind = "release build"
        #endif
        #if arch(x86_64)
            let machine = "x86_64"
        #elseif arch(arm64)
            let machine = "arm64"
        #else
            let machine = "unknown machine"
        #endif
        return "\(kind), Linux \(machine)"
    }

    /// Parses, runs, and turns every failure into the documented output and exit status (see
    /// `CommandOutcome`), for parse errors and failures inside a command alike.
    static func main() async {
        // What Keyferry writes (keychains, sandboxes, archives, staging copies, logs) is its
        // owner's alone, from the moment it is created.
        ProcessControl.restrictNewFilesToOwner()
        // Every command may hold class keys or secrets (a node, a restore, a backup made
        // offline); none of it goes into a core file. KEYFERRY_DEBUG_CRASHES=1 keeps cores and
        // full backtraces for whoever debugs Keyferry itself, knowing they may hold secrets.
        if ProcessInfo.processInfo.environment["KEYFERRY_DEBUG_CRASHES"] != "1" { ProcessControl.keepMemoryPrivate() }
        var arguments = Array(CommandLine.arguments.dropFirst())
        // `app` commands named the bundle ID `--bundle` before every command took `--app`: those
        // that take an app still understand it (`app list` never took either).
        if arguments.first == "app", arguments.count > 1, ["install", "uninstall", "defaults", "file"].contains(arguments[1]),
            let index = arguments.firstIndex(where: { $0 == "--bundle" || $0.hasPrefix("--bundle=") })
        {
            arguments[index] = "--app" + arguments[index].dropFirst("--bundle".count)
            warn("--bundle is now --app, as in every other command.")
        }
        // The table of exit statuses is a help topic that also answers in JSON, for scripts.
        if arguments == ["help", "exit-codes", "--json"] { arguments.removeFirst() }
        let json = arguments.contains("--json")
        // `keyferry help WORD` for a WORD that names no command would print the top-level help.
        if arguments.first == "help", let typo = SubcommandTypo.find(in: Array(arguments.dropFirst())) {
            CommandOutcome.typo(typo, json: json).finish()
        }
        let command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            // Help, --version and completion scripts are "errors" that exit cleanly.
            if exitCode(for: error) == .success { exit(withError: error) }
            CommandOutcome.usage(parsing: error, arguments: arguments, json: json).finish()
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var syncCommand = command
                try syncCommand.run()
            }
        } catch {
            // A command without a body of its own asks for its help the same way.
            if exitCode(for: error) == .success { exit(withError: error) }
            CommandOutcome(error, command: type(of: command), json: json).finish()
        }
    }
}
