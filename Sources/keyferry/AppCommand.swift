import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Node
import NodeControl

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Install and uninstall apps, and read and write their UserDefaults and sandbox files.",
        subcommands: [Install.self, Uninstall.self, List.self, Defaults.self, File.self])

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "install",
            abstract: "Install an app with its team and keychain access groups.",
            discussion:
                "TEAMID.bundleID is always entitled; --group adds shared groups: TEAMID.… (Apple's keychain-access-groups) or group.… (an app group: a keychain group and a shared container, which goes with the last app of the group). Installing again updates the entitlements and keeps the sandbox."
        )

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The app's bundle ID, e.g. com.example.mail.", transform: Checked.bundleID) var app: String
        @Option(help: "Ten-character team ID.", transform: Checked.teamID) var team: String
        @Option(help: "An extra keychain access group or app group (repeatable), e.g. TEAMID.shared or group.com.example.shared.") var group: [String] = []
        @Option(
            help: ArgumentHelp(
                "The App ID prefix, when it is not the team ID (an app registered before 2011): its own group is PREFIX.bundleID, and --group may name PREFIX.… groups.",
                valueName: "PREFIX"),
            transform: Checked.appIDPrefix)
        var appIDPrefix: String?
        @Option(
            help: "For an app extension (a widget, a notification service): the installed app it ships inside, removed with it.",
            transform: Checked.bundleID)
        var extensionOf: String?
        @Flag(
            help:
                "Install it without a keychain entitlement, as a build signed without one runs: every SecItem call is errSecMissingEntitlement (-34018)."
        )
        var noKeychainEntitlement = false
        @Flag(
            help:
                "On a Mac: a Mac Catalyst app, or an iPhone or iPad app on an Apple silicon Mac. Its calls reach the data protection keychain alone, never the file-based one."
        )
        var catalyst = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let manifest = AppManifest(
                bundleID: app, teamID: team, accessGroups: group, hasKeychainEntitlement: !noKeychainEntitlement, containingApp: extensionOf,
                appIDPrefix: appIDPrefix, uikitOnMac: catalyst)
            try manifest.validate()
            let apps = try await device.client.apps()
            let before = apps.first { $0.bundleID == app }
            try await device.client.send(.install, manifest)
            var orphaned: [String: Int] = [:]
            if let before { orphaned = try await orphans(replacing: before, with: manifest, among: apps) }
            if let before, before.teamID != team {
                let lost = before.entitledGroups.filter { !manifest.entitledGroups.contains($0) }
                warn(
                    "\(app) was installed under team \(before.teamID): under \(team) this is an app transfer"
                        + (lost.isEmpty ? "." : "; the app no longer reaches \(lost.joined(separator: ", ")), nor the items in them."))
            }
            for (group, count) in orphaned.sorted(by: { $0.key < $1.key }) {
                warn(
                    "\(app) no longer reaches \(group), and no other app does: its \(count.items) \(count == 1 ? "stays" : "stay") on the device, orphaned, until an app is entitled to \(group) again."
                )
            }
            if output.json {
                var presented = manifest.presented
                if before != nil { presented["orphaned"] = orphaned }
                printJSON(presented)
            } else if noKeychainEntitlement {
                say("installed \(app) without a keychain entitlement: every keychain call it makes is errSecMissingEntitlement (-34018)")
            } else {
                say("installed \(app), groups: \(manifest.entitledGroups.joined(separator: ", "))")
            }
        }
    }
}

extension AppCommand.Install {
    /// The items an update leaves unreachable: in the groups the app had and has no more, that
    /// no other installed app is entitled to, by group (the seeds' orphaned items, 86).
    func orphans(replacing before: AppManifest, with after: AppManifest, among apps: [AppManifest]) async throws -> [String: Int] {
        let others = Set(apps.filter { $0.bundleID != before.bundleID }.flatMap(\.entitledGroups))
        let lost = Set(before.entitledGroups).subtracting(after.entitledGroups).subtracting(others)
        guard !lost.isEmpty else { return [:] }
        let listing: ItemListing = try await device.client.call(.list, NodeAPI.List(app: nil))
        return listing.items.reduce(into: [:]) { counts, item in
            if lost.contains(item.accessGroup) { counts[item.accessGroup, default: 0] += 1 }
        }
    }
}

extension AppCommand {
    struct Uninstall: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "uninstall",
            abstract: "Uninstall an app with its extensions: their sandboxes are wiped, and the app groups no other app holds; keychain items stay.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            // Uninstalling what is not installed is nothing to do, as stopping a stopped node is.
            do {
                try await device.client.send(.uninstall, NodeAPI.Uninstall(bundleID: app))
            } catch let error as DeviceError where error.code == .appNotInstalled {
                if output.json { printJSON(["uninstalled": NSNull(), "notInstalled": app]) } else { say("nothing to do: \(app) is not installed") }
                return
            }
            if output.json { printJSON(["uninstalled": app]) } else { say("uninstalled \(app); its keychain items stay on the device") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List installed apps and their access groups.")

        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let apps = try await device.client.apps()
            if output.json {
                printJSON(apps.map(\.presented))
                return
            }
            for app in apps {
                let groups = app.hasKeychainEntitlement ? "groups \(app.entitledGroups.joined(separator: ","))" : "no keychain entitlement"
                let prefix = app.appIDPrefix.map { "  App ID prefix \($0)" } ?? ""
                let uikit = app.uikitOnMac == true ? "  UIKit on a Mac" : ""
                print("\(app.bundleID)  team \(app.teamID)\(prefix)  \(groups)\(uikit)" + (app.containingApp.map { "  extension of \($0)" } ?? ""))
            }
            if apps.isEmpty { say("no apps installed") }
        }
    }

    struct Defaults: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "defaults",
            abstract: "Read or write an app's UserDefaults (a plaintext property list in its sandbox).",
            discussion:
                "UserDefaults are unreadable before first unlock, as on iOS, and so is an app group's suite (UserDefaults(suiteName:)) that --app-group reaches: a widget's too."
        )

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var appGroup: AppGroupOption
        @Option(help: "Set KEY=VALUE (a string unless --type says otherwise).") var set: String?
        @Option(help: "The type --set stores its value as, as app code would: string, int, real, bool, date (ISO 8601) or data (hex: or base64:).")
        var type: ValueType = .string
        @Option(help: "Remove KEY, as removeObject(forKey:) does.") var remove: String?
        @Option(help: "Print one value.") var get: String?
        @Flag(help: "Print every entry.") var list = false
        @OptionGroup var output: OutputOptions

        enum ValueType: String, ExpressibleByArgument, CaseIterable {
            case string, int, real, bool, date, data
        }

        func validate() throws {
            guard [set != nil, get != nil, list, remove != nil].filter({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --set KEY=VALUE, --remove KEY, --get KEY or --list.")
            }
            if let set, !set.contains("=") { throw ValidationError("--set takes KEY=VALUE.") }
            if type != .string, set == nil { throw ValidationError("--type goes with --set.") }
        }

        func run() async throws {
            if remove != nil || type != .string { return try await writeTyped() }
            var request = NodeAPI.Defaults(bundleID: app, group: appGroup.name)
            if let set, let equals = set.firstIndex(of: "=") {
                request.set[String(set[..<equals])] = String(set[set.index(after: equals)...])
            }
            let all: [String: String] = try await device.client.call(.defaults, request)
            let owner = appGroup.name.map { "the suite \($0)" } ?? app
            // Before the first unlock UserDefaults read back empty, as on iOS: the prewarming
            // trap. An empty answer then is the point of the simulation, and is said to be one.
            let lockState = set == nil && all.isEmpty ? try? await device.client.deviceStatus().lockState : nil
            let sealed = lockState == .beforeFirstUnlock
            let why = "before first unlock \(owner)'s UserDefaults read back empty, as on iOS; unlock the device to read them"
            if let get {
                guard let value = all[get] else {
                    if sealed { throw CommandFailure(.unavailable, "\(why).") }
                    throw CommandFailure(.notFound, "\(owner) has no UserDefaults value for '\(get)'.")
                }
                if output.json { printJSON([get: value]) } else { print(value) }
            } else if list {
                if sealed { warn(why) }
                if output.json {
                    printJSON(all)
                } else {
                    for (key, value) in all.sorted(by: { $0.key < $1.key }) { print("\(key)=\(value)".escapingControlCharacters) }
                }
            } else if output.json {
                printJSON(request.set)
            } else {
                say("set \(request.set.map { "\($0.key)=\($0.value)" }.joined()) in \(owner)'s UserDefaults")
            }
        }

        /// A typed value, or a removal, written as a property list: what `UserDefaults.set(_:forKey:)`
        /// and `removeObject(forKey:)` store.
        private func writeTyped() async throws {
            let owner = appGroup.name.map { "the suite \($0)" } ?? app
            var request = NodeAPI.DefaultsPlist(bundleID: app, remove: remove.map { [$0] } ?? [], group: appGroup.name)
            if let set, let equals = set.firstIndex(of: "=") {
                let key = String(set[..<equals])
                let value = try typed(String(set[set.index(after: equals)...]))
                request.set = try PropertyListSerialization.data(fromPropertyList: [key: value], format: .binary, options: 0)
            }
            let _: NodeAPI.DefaultsPlistContents = try await device.client.call(.defaultsPlist, request)
            if output.json {
                printJSON(remove.map { ["removed": $0] } ?? ["set": set ?? "", "type": type.rawValue])
            } else {
                say(remove.map { "removed \($0) from \(owner)'s UserDefaults" } ?? "set \(set ?? "") (\(type.rawValue)) in \(owner)'s UserDefaults")
            }
        }

        private func typed(_ text: String) throws -> Any {
            let value: Any? =
                switch type {
                case .string: text
                case .int: Int(text)
                case .real: Double(text)
                case .bool: ["true": true, "yes": true, "1": true, "false": false, "no": false, "0": false][text.lowercased()]
                case .date: try? Date(text, strategy: .iso8601)
                case .data:
                    text.hasPrefix("hex:")
                        ? Hex.decode(text.dropFirst(4)).map { Data($0) } : text.hasPrefix("base64:") ? Data(base64Encoded: String(text.dropFirst(7))) : nil
                }
            guard let value else {
                throw ValidationError(
                    "--set: '\(text)' is not \(type == .int ? "an" : "a") \(type.rawValue) value\(type == .data ? " (write it hex:... or base64:...)" : "").")
            }
            return value
        }
    }
}

extension AppCommand {
    struct File: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "file",
            abstract: "List, read, write or remove files under an app's Documents, or in an app group's container.",
            discussion: """
                Each file has a data protection class, as on iOS: complete (readable only while \
                unlocked), completeUntilFirstUserAuthentication (the default: after first unlock) \
                or none. Reading a file whose class is unavailable fails; backups carry the files \
                in every archive, encrypted or not.

                  keyferry app file DIR --app APP --list
                  keyferry app file DIR --app APP --write Token.dat --text abc
                  keyferry app file DIR --app APP --write Vault.db --from vault.db \\
                      --protection complete
                  keyferry app file DIR --app APP --read Token.dat > token
                  keyferry app file DIR --app APP --app-group group.com.example.shared --list
                """)

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var appGroup: AppGroupOption
        @Flag(help: "List the files with their protection class and size.") var list = false
        @Option(help: "Write the file at PATH (under Documents) from --text or --from.") var write: String?
        @Option(help: "Print the file at PATH, byte for byte (--json: as text or base64).") var read: String?
        @Option(help: "Remove the file at PATH.") var remove: String?
        @Option(help: "With --write: the contents as text.") var text: String?
        @Option(help: "With --write: the contents, byte for byte, from this file.", completion: .file()) var from: String?
        @Option(
            help: "With --write: complete, completeUnlessOpen, completeUntilFirstUserAuthentication (default) or none.",
            transform: Self.protection) var protection: FileProtection?
        @OptionGroup var output: OutputOptions

        static func protection(_ text: String) throws -> FileProtection {
            guard let value = FileProtection(rawValue: text) else {
                throw ValidationError(
                    "'\(text)' is not a file protection class; expected one of: \(FileProtection.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            return value
        }

        func validate() throws {
            guard [list, write != nil, read != nil, remove != nil].filter({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --list, --write PATH, --read PATH or --remove PATH.")
            }
            if write != nil {
                guard (text == nil) != (from == nil) else { throw ValidationError("--write takes the contents from exactly one of --text or --from.") }
            } else if text != nil || from != nil || protection != nil {
                throw ValidationError("--text, --from and --protection go with --write.")
            }
        }

        func run() async throws {
            let client = device.client
            if list {
                let files: [NodeAPI.FileInfo] = try await client.call(.files, NodeAPI.Files(bundleID: app, group: appGroup.name))
                if output.json {
                    try printJSON(encodable: files)
                    return
                }
                if files.isEmpty { say(appGroup.name.map { "the group container \($0) has no files" } ?? "\(app) has no files under Documents") }
                for file in files { print("\(shown(file.path))  \(file.protection.rawValue)  \(byteSize(file.bytes))".escapingControlCharacters) }
            } else if let path = write {
                let limit = NodeAPI.File.maximumBytes
                let contents = try text.map { Data($0.utf8) } ?? readInput(from, what: "the file", limit: limit)
                guard contents.count <= limit else {
                    throw ValidationError("\(from ?? "the text") is larger than a file Keyferry writes in one call (\(byteSize(limit))).")
                }
                let _: NodeAPI.FileContents = try await client.call(
                    .file, NodeAPI.File(bundleID: app, path: path, contents: contents, protection: protection, group: appGroup.name))
                if output.json { printJSON(["path": path, "bytes": contents.count]) } else { say("wrote \(shown(path)) (\(byteSize(contents.count)))") }
            } else if let path = read {
                let file: NodeAPI.FileContents = try await client.call(.file, NodeAPI.File(bundleID: app, path: path, group: appGroup.name))
                let contents = file.contents ?? Data()
                if output.json {
                    let text = String(data: contents, encoding: .utf8)
                    printJSON(["path": path, "bytes": contents.count, text == nil ? "base64" : "text": text ?? contents.base64EncodedString()])
                } else {
                    FileHandle.standardOutput.write(contents)
                }
            } else if let path = remove {
                let _: NodeAPI.FileContents = try await client.call(.file, NodeAPI.File(bundleID: app, path: path, remove: true, group: appGroup.name))
                if output.json { printJSON(["removed": path]) } else { say("removed \(shown(path))") }
            }
        }

        /// `Documents/PATH` in the app's sandbox, `GROUP/PATH` in a group container.
        private func shown(_ path: String) -> String { "\(appGroup.name ?? "Documents")/\(path)" }
    }
}

extension AppManifest {
    /// As `app list` shows an app: every group it is entitled to, `TEAMID.bundleID` included.
    var presented: [String: Any] {
        var out: [String: Any] = ["bundleID": bundleID, "teamID": teamID, "accessGroups": entitledGroups, "appGroups": appGroups]
        if let containingApp { out["extensionOf"] = containingApp }
        if let appIDPrefix { out["appIDPrefix"] = appIDPrefix }
        if uikitOnMac == true { out["uikitOnMac"] = true }
        if !hasKeychainEntitlement { out["keychainEntitlement"] = false }
        return out
    }
}

/// `--app-group`: an app group's shared container, as the app reaches it.
struct AppGroupOption: ParsableArguments {
    @Option(
        name: .customLong("app-group"),
        help: "An app group the app is entitled to (group.…): its shared container rather than the app's sandbox.")
    var name: String?
}
