import ArgumentParser

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
            access groups, app installs. Start with `keyferry demo`, bring up a ready-made fleet with \
            `keyferry fleet up Peers/family.yaml`, or drive one device by hand:

              keyferry device init ./phone --passcode 123456
              keyferry node start ./phone
              keyferry device unlock ./phone --passcode 123456
              keyferry app install ./phone --bundle com.example.mail --team ABCDE12345
              keyferry item add ./phone --app com.example.mail --account alice --value-stdin
              keyferry item get ./phone --app com.example.mail --account alice
              keyferry node stop ./phone

            Exit status: 0 success; 3 a keychain status other than success (errSecName (-NNNNN) on \
            stderr); 64 a usage error; 1 any other failure.
            """,
        version: version,
        subcommands: [DeviceCommand.self, NodeCommand.self, AppCommand.self, ItemCommand.self, FleetCommand.self, BackupCommand.self, RestoreCommand.self, CircleCommand.self, SyncCommand.self, RelayCommand.self, DemoCommand.self, BenchCommand.self])
}
