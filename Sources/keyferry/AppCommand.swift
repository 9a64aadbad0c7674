import ArgumentParser
import Foundation
import KeychainStore
import Node

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Install and uninstall apps, and read and write their UserDefaults.",
        subcommands: [Install.self, Uninstall.self, List.self, Defaults.self])

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "install", 
            abstract: "Install an app with its team and keychain access groups.",
            discussion: "TEAMID.bundleID is always entitled; --group adds shared groups (Apple's keychain-access-groups). Installing again updates the entitlements and keeps the sandbox.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "Bundle ID, e.g. com.example.mail.", transform: Checked.bundleID) var bundle: String
        @Option(help: "Ten-character team ID.", transform: Checked.teamID) var team: String
        @Option(help: "An extra keychain access group (repeatable), e.g. TEAMID.shared.") var group: [String] = []
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let manifest = AppManifest(bundleID: bundle, teamID: team, accessGroups: group)
            try manifest.validate()
            try await device.client.send(.install, manifest)
            if output.json { printJSON(manifest.presented) } else { say("installed \(bundle), groups: \(manifest.entitledGroups.joined(separator: ", "))") }
        }
    }

    struct Uninstall: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "uninstall", abstract: "Uninstall an app: its sandbox is wiped, its keychain items stay.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "Bundle ID.", transform: Checked.bundleID) var bundle: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await device.client.send(.uninstall, NodeAPI.Uninstall(bundleID: bundle))
            if output.json { printJSON(["uninstalled": bundle]) } else { say("uninstalled \(bundle); its keychain items stay on the device") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List installed apps and their access groups.")

        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let apps = try await device.client.apps()
            if output.json { printJSON(apps.map(\.presented)); return }
            for app in apps { print("\(app.bundleID)  team \(app.teamID)  groups \(app.entitledGroups.joined(separator: ","))") }
        }
    }

    struct Defaults: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "defaults", 
            abstract: "Read or write an app's UserDefaults (a plaintext property list in its sandbox).",
            discussion: "UserDefaults are unreadable before first unlock, as on iOS.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "Bundle ID.", transform: Checked.bundleID) var bundle: String
        @Option(help: "Set KEY=VALUE (a string).") var set: String?
        @Option(help: "Print one value.") var get: String?
        @Flag(help: "Print every entry.") var list = false
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard [set != nil, get != nil, list].filter({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --set KEY=VALUE, --get KEY or --list.")
            }
            if let set, !set.contains("=") { throw ValidationError("--set takes KEY=VALUE.") }
        }

        func run() async throws {
            var request = NodeAPI.Defaults(bundleID: bundle)
            if let set, let equals = set.firstIndex(of: "=") {
                request.set[String(set[..<equals])] = String(set[set.index(after: equals)...])
            }
            let all: [String: String] = try await device.client.call(.defaults, request)
            if let get {
                guard let value = all[get] else {
                    throw DeviceError(.invalidArgument, "\(bundle) has no UserDefaults value for '\(get)'.")
                }
                if output.json { printJSON([get: value]) } else { print(value) }
            } else if list {
                if output.json { printJSON(all) } else { for (key, value) in all.sorted(by: { $0.key < $1.key }) { print("\(key)=\(value)") } }
            } else if output.json {
                printJSON(request.set)
            }
        }
    }
}

extension AppManifest {
    /// As `app list` shows an app: every group it is entitled to, `TEAMID.bundleID` included.
    var presented: [String: Any] {
        ["bundleID": bundleID, "teamID": teamID, "accessGroups": entitledGroups]
    }
}
