import ArgumentParser

@main
struct Keyferry: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "keyferry",
        abstract: "Simulated Apple devices with real, encrypted keychains.",
        discussion: """
            Keyferry runs simulated iPhones and iPads on Linux. Each device keeps an encrypted keychain \
            that behaves like the one on a phone: protection classes, lock states, passcode and biometry, \
            access groups, app installs. Start with `keyferry demo`.
            """,
        version: version,
        subcommands: [DemoCommand.self, BenchCommand.self])
}
