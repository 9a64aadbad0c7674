import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferrySecurity
import KeyferrySystem
import KeyferryThreads
import NodeControl

struct ItemCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "item",
        abstract: "SecItemAdd, SecItemCopyMatching, SecItemUpdate and SecItemDelete as one app sees them.",
        discussion: """
            A keychain status prints `errSecName (-NNNNN): sentence` on stderr and exits 3 \
            (errSecAuthFailed: 4, as every wrong or missing passcode). Classes and \
            protection classes are written as Apple names them without prefix (genericPassword, \
            whenUnlocked), in any case; Apple's short codes (genp, ak) and constants \
            (kSecClassGenericPassword, kSecAttrAccessibleWhenUnlocked) are read too. Output always \
            uses the names without prefix.
            """,
        subcommands: [Add.self, Get.self, Update.self, Delete.self, List.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add an item (SecItemAdd). Give the secret with --value-file or --value-stdin.",
            discussion: """
                A certificate comes from its DER (--class certificate --from FILE.der): its attributes \
                (issuer, serial number, subject, the SHA-1 of its public key ...) are derived as Apple's \
                keychain derives them. An identity comes from a PKCS #12 file (--class identity --p12 \
                FILE.p12 --password-file F, as `openssl pkcs12 -export` writes one): its certificate \
                and private key are added together, as SecItemAdd adds a SecIdentity. A wrong password \
                exits 4 with errSecAuthFailed.
                """)

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The calling app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var attributes: ItemAttributes
        @OptionGroup var secret: SecretInput
        @Option(help: "kSecAttrAccessible (default: whenUnlocked; certificates: always).") var accessible: ProtectionClass?
        @Option(
            help: ArgumentHelp(
                "kSecAttrAccessControl flags joined by their combinator, e.g. biometryCurrentSet|or|devicePasscode.", valueName: "EXPR"),
            transform: Checked.accessControl)
        var accessControl: String?
        @Flag(help: "kSecAttrSynchronizable: sync the item to the user's other devices.") var sync = false
        @Option(help: "With --class certificate: the certificate's DER.", completion: .file()) var from: String?
        @Option(help: "With --class identity: a PKCS #12 file (.p12) holding a certificate and its private key.", completion: .file())
        var p12: String?
        @Option(help: "With --p12: a file whose first line is its password (none: an empty password).", completion: .file())
        var passwordFile: String?
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if from != nil, attributes.itemClass != .certificate { throw ValidationError("--from reads a certificate: add --class certificate.") }
            if p12 != nil, attributes.itemClass != .identity { throw ValidationError("--p12 reads an identity: add --class identity.") }
            if passwordFile != nil, p12 == nil { throw ValidationError("--password-file is the --p12 file's password; give --p12.") }
            if from != nil || p12 != nil, secret.given > 0 { throw ValidationError("--from and --p12 are the item; give no --value too.") }
            if attributes.itemClass == .identity, p12 == nil {
                throw ValidationError("an identity is a certificate and its private key: give them as --p12 FILE.p12 --password-file F.")
            }
            if secret.given == 0, from == nil, p12 == nil { throw ValidationError("give the secret with --value-file, --value-stdin or --value.") }
        }

        func run() async throws {
            if let p12 {
                try await addIdentities(from: p12)
                return
            }
            var base: NewItem?
            if let from {
                let der = try readInput(from, what: "the certificate", limit: 1 << 20)
                guard let certificate = SecCertificate(der: der) else {
                    throw CommandFailure(
                        .invalidInput, "\(from) is not a DER X.509 certificate (a PEM one converts with: openssl x509 -in FILE.pem -outform DER).")
                }
                base = certificate.newItem
            }
            var item = NewItem(
                attributes.itemClass, attributes: (base?.attributes ?? [:]).merging(try attributes.attributes()) { $1 },
                data: try base?.data ?? secret.read() ?? Data(), accessGroup: attributes.group, synchronizable: sync, returning: .attributes,
                useDataProtectionKeychain: attributes.useDataProtectionKeychain)
            try protect(&item)
            warnTraps(storing: accessible, synchronizable: sync)
            let answer: NodeAPI.Items = try await device.client.call(.add, NodeAPI.Add(app: app, item: item))
            // A Mac drops the accessibility of code that never set kSecUseDataProtectionKeychain,
            // without an error: the trap a test on Linux is here to show.
            if accessible != nil, answer.items.contains(where: { $0.macKeychain == .fileBased }) {
                warn(
                    "the file-based keychain ignores --accessible (it opens once the user has logged in); "
                        + "add --keychain data-protection to keep it (kSecUseDataProtectionKeychain).")
            }
            if output.json { printJSON(answer.items.map { $0.presented(withData: false) }) } else { say(answer.items.map(\.headline).joined(separator: "\n")) }
        }

        /// Each identity of the file: its certificate and private key, added together.
        private func addIdentities(from path: String) async throws {
            let data = try readInput(path, what: "the PKCS #12 file", limit: 16 << 20)
            let password = try passwordFile.map { firstLine(of: try readInput($0, what: "the password file", limit: 64 << 10)) } ?? ""
            // Key derivation may take a while for a file that asks for many iterations: off the cooperative pool.
            let found: [(identity: SecIdentity, chain: [SecCertificate], bag: PKCS12.Bag)]
            do {
                found = try await BlockingPool.shared.run { _ in try SecIdentity.identities(in: try PKCS12(data, password: password)) }
            } catch let error as KeychainError where error.status == .authFailed && passwordFile == nil {
                throw KeychainError(.authFailed, "\(path) is protected by a password; give it with --password-file F (its first line).")
            }
            guard !found.isEmpty else { throw CommandFailure("\(path) holds no private key, so no identity.") }
            var added: [[String: Any]] = []
            for (identity, _, bag) in found {
                var (certificate, privateKey) = identity.newItems
                let given = try attributes.attributes()
                certificate.attributes.merge(given) { $1 }
                if given[.label] == nil, let name = bag.friendlyName { certificate.attributes[.label] = .string(name) }
                // The key is named as its certificate is, so each shows by name (item list, survival).
                privateKey.attributes[.label] = certificate.attributes[.label]
                try placed(&certificate)
                try placed(&privateKey)
                let _: NodeAPI.Items = try await device.client.call(.add, NodeAPI.Add(app: app, item: certificate, privateKey: privateKey))
                added.append(["subject": identity.subjectSummary ?? "", "label": certificate.attributes[.label]?.text ?? "", "key": identity.keyDescription])
            }
            if output.json {
                printJSON(["identities": added])
            } else {
                say(added.map { "identity \($0["subject"]!): certificate and \($0["key"]!) private key" }.joined(separator: "\n"))
            }
        }

        /// The group, sync setting and protection given, on one half of an identity.
        private func placed(_ item: inout NewItem) throws {
            (item.accessGroup, item.synchronizable, item.useDataProtectionKeychain) = (attributes.group, sync, attributes.useDataProtectionKeychain)
            try protect(&item)
        }

        private func protect(_ item: inout NewItem) throws {
            if let accessControl {
                item.accessControl = try AccessControl(protection: accessible ?? item.itemClass.defaultProtection, expression: accessControl)
            } else {
                item.protection = accessible
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Find items (SecItemCopyMatching).",
            discussion: """
                With one item and --return data (the default) the secret's bytes are printed exactly, \
                nothing added, into a pipe or a file (on a terminal, a newline follows). --json prints an array of items; data appears as base64 (and as text when \
                it is UTF-8).
                """)

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The calling app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var attributes: ItemAttributes
        @OptionGroup var search: SearchOptions
        @Option(help: "kSecMatchLimit: one (default), all, or a number.", transform: Checked.matchLimit) var limit: MatchLimit = .one
        @Option(name: .customLong("return"), help: "What to return: data (default), attributes or both.") var returning: Returning = .data
        @Option(
            help: ArgumentHelp(
                "The simulated user's answer to a prompt: match, nomatch, cancel, passcode:CODE (visible in the process list), passcode-file:FILE (its first line); none forbids prompts; skip leaves out the items that would need one (kSecUseAuthenticationUISkip). Repeat for successive prompts.",
                valueName: "RESPONSE"))
        var auth: [AuthChoice] = []
        @OptionGroup var output: OutputOptions

        enum Returning: String, ExpressibleByArgument, CaseIterable {
            case data, attributes, both
            var options: ReturnOptions {
                switch self {
                case .data: .data
                case .attributes: .attributes
                case .both: [.data, .attributes]
                }
            }
        }

        func run() async throws {
            var query = try search.query(attributes)
            query.matchLimit = limit
            query.returning = returning.options
            query.authentication = try AuthChoice.context(auth)
            let answer: NodeAPI.Items = try await search.hintingSynchronizable(query, app: app, on: device.client) {
                try await device.client.call(.copy, NodeAPI.Search(app: app, query: query))
            }
            for item in answer.damaged { warn("passed over \(item)") }
            if output.json {
                printJSON(answer.items.map { $0.presented(withData: returning != .attributes) })
            } else if returning == .data, answer.items.count == 1, let data = answer.items[0].data {
                FileHandle.standardOutput.write(data)
                // A prompt after the secret would read as part of it.
                if ProcessControl.standardOutputIsTerminal { print() }
            } else {
                // A line per item, as `item list` prints them; a blank line between items only
                // when each has its data beneath.
                let withData = returning != .attributes
                print(answer.items.map { $0.described(withData: withData) }.joined(separator: withData ? "\n\n" : "\n"))
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "update",
            abstract: "Change every matching item (SecItemUpdate).",
            discussion: "The search flags pick the items; the --set-* flags say what changes. Changing the account or service changes the primary key.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The calling app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var attributes: ItemAttributes
        @OptionGroup var search: SearchOptions
        @Option(help: "New secret as text (for tests; prefer --set-value-file or --set-value-stdin).") var setValue: String?
        @Option(help: "Read the new secret from this file.", completion: .file()) var setValueFile: String?
        @Flag(help: "Read the new secret from standard input.") var setValueStdin = false
        @Option(help: "New kSecAttrAccount.") var setAccount: String?
        @Option(help: "New kSecAttrService.") var setService: String?
        @Option(help: "New kSecAttrLabel.") var setLabel: String?
        @Option(help: "New kSecAttrAccessible.") var setAccessible: ProtectionClass?
        @Option(help: "Move to another of the app's access groups.") var setGroup: String?
        @Option(
            help: ArgumentHelp(
                "New kSecAttrSynchronizable: yes or no. Making an item local deletes it on the user's other devices; this one keeps it.",
                valueName: "yes|no"))
        var setSync: YesNo?
        @Option(help: "Any other new attribute as NAME=VALUE (repeatable).") var setAttr: [String] = []
        @Option(
            help: ArgumentHelp(
                "The simulated user's answer when an item to change asks for them: match, nomatch, cancel, passcode:CODE, passcode-file:FILE; none forbids prompts. Repeat for successive prompts.",
                valueName: "RESPONSE"))
        var auth: [AuthChoice] = []
        @Flag(help: "Update every item of the class the app sees, when no attribute narrows the search.") var all = false
        @OptionGroup var output: OutputOptions

        func validate() throws {
            let sources = [setValue != nil, setValueFile != nil, setValueStdin].filter { $0 }.count
            guard sources <= 1 else { throw ValidationError("give the new secret once: --set-value, --set-value-file or --set-value-stdin.") }
        }

        func run() async throws {
            var query = try search.query(attributes)
            query.authentication = try AuthChoice.context(auth)
            var changes = ItemChanges(
                accessGroup: setGroup, protection: setAccessible, synchronizable: setSync?.value,
                data: try readSecret(text: setValue, file: setValueFile, stdin: setValueStdin))
            warnTraps(storing: setAccessible, synchronizable: setSync?.value == true)
            if let setAccount { changes.attributes[.account] = .string(setAccount) }
            if let setService { changes.attributes[.service] = .string(setService) }
            if let setLabel { changes.attributes[.label] = .string(setLabel) }
            for assignment in setAttr {
                let (key, value) = try parseAssignment(assignment, flag: "--set-attr")
                changes.attributes[key] = value
            }
            guard !changes.isEmpty else { throw ValidationError("say what to change with a --set-* flag.") }
            try search.requireNarrowed(attributes, all: all, verb: "update", app: app)
            let changed: NodeAPI.Changed = try await search.hintingSynchronizable(query, app: app, on: device.client) {
                try await device.client.call(.update, NodeAPI.Update(app: app, query: query, changes: changes))
            }
            if output.json { printJSON(["updated": changed.count]) } else { say("updated \(changed.count.items)") }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Delete every matching item (SecItemDelete). Works while locked, as on iOS.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The calling app's bundle ID.", transform: Checked.bundleID) var app: String
        @OptionGroup var attributes: ItemAttributes
        @OptionGroup var search: SearchOptions
        @Flag(help: "Delete every item of the class the app sees, when no attribute narrows the search.") var all = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let query = try search.query(attributes)
            try search.requireNarrowed(attributes, all: all, verb: "delete", app: app)
            let changed: NodeAPI.Changed = try await search.hintingSynchronizable(query, app: app, on: device.client) {
                try await device.client.call(.delete, NodeAPI.Search(app: app, query: query))
            }
            if output.json { printJSON(["deleted": changed.count]) } else { say("deleted \(changed.count.items)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List items, attributes only (never secrets): one app's, or the whole device's.",
            discussion: """
                Items of protection classes that are sealed in the current lock state are counted as unavailable, not shown. \
                An item whose stored row fails authentication (damaged, or edited) is left out and named on stderr; the rest are listed.
                """)

        @OptionGroup var device: DeviceDirectory
        @Option(help: "Only what this app can see.", transform: Checked.bundleID) var app: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let listing: ItemListing = try await device.client.call(.list, NodeAPI.List(app: app))
            if output.json {
                printJSON([
                    "items": listing.items.map { $0.presented(withData: false) }, "unavailable": listing.unavailable.map(\.name),
                    "damaged": listing.damaged.map {
                        ["uuid": $0.uuid.uuidString, "class": $0.itemClass.name, "protection": $0.protection.name, "problem": $0.problem]
                    },
                ])
                return
            }
            for item in listing.items { print(item.headline) }
            // One damaged row hides only itself: named, after what could be read.
            for item in listing.damaged { warn("left out \(item)") }
            // A sentence rather than nothing; --quiet and --json leave it out, for scripts.
            if listing.items.isEmpty && listing.unavailable.isEmpty { say(app.map { "no keychain item \($0) can see" } ?? "no keychain items") }
            if !listing.unavailable.isEmpty {
                print("sealed in this lock state: \(listing.unavailable.map(\.name).joined(separator: ", "))")
            }
        }
    }
}

/// A yes-or-no option's value; true and false are accepted too.
struct YesNo: ExpressibleByArgument {
    let value: Bool

    init?(argument: String) {
        switch argument.lowercased() {
        case "yes", "true": value = true
        case "no", "false": value = false
        default: return nil
        }
    }

    static var allValueStrings: [String] { ["yes", "no"] }
}

/// What `keyferry audit` would record of an app's call storing this, said on stderr: a command
/// line user gets the warning app code would (the audit sees only Keychain Services calls).
func warnTraps(storing protection: ProtectionClass?, synchronizable: Bool) {
    if protection == .always || protection == .alwaysThisDeviceOnly {
        warn("\(KeychainTrap.deprecatedAlways.title): \(KeychainTrap.deprecatedAlways.why)")
    }
    if synchronizable, protection?.isThisDeviceOnly == true {
        warn("\(KeychainTrap.synchronizableThisDeviceOnly.title): \(KeychainTrap.synchronizableThisDeviceOnly.why)")
    }
}
