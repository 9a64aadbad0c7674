package import Fleet
package import Foundation
package import KeychainModel
package import Survival
import Yams

/// A scenario file: devices and apps (inline, as in a fleet file, or a fleet file by path), the
/// items to seed, then steps and expectations. Protocol/scenario.md specifies it. Everything is
/// checked before anything runs; a problem is a `FleetFileError` naming file, line, column and field.
package struct Scenario: Sendable {
    package var name: String
    /// The file as the user named it.
    package var file: String
    /// Where the scenario comes from: a seed, an Apple test, a trap.
    package var source: String?
    package var fleet: FleetFile
    package var steps: [Step]

    package struct Step: Sendable {
        package var line: Int
        package var action: Action
        /// The step as a line of output: `lock phone`, `expect phone alice = "s3cret"`.
        package var summary: String
    }

    /// One item by its primary key, as one app searches for it.
    package struct ItemRef: Sendable {
        package var device: String
        package var app: String
        package var account: String
        package var service: String
        package var synchronizable: SynchronizableMatch
        /// The access group it is added to or searched in; nil: the app's default group on
        /// add, every group it is entitled to on a search.
        package var group: String?
        /// What the simulated user does if the item asks for authentication.
        package var user: User
        /// Which of a Mac's keychains the call names (`kSecUseDataProtectionKeychain`); nil:
        /// neither, as code that never heard of the key.
        package var keychain: MacKeychain? = nil
        /// An internet password's kSecAttrServer, and its kSecAttrProtocol code (`htps`): the
        /// item is an internetPassword, and `service` plays no part.
        package var server: String? = nil
        package var protocolCode: String? = nil
        /// A key's kSecAttrApplicationTag: the item is a key, found by its tag alone.
        package var tag: String? = nil

        var useDataProtectionKeychain: Bool? { keychain.map { $0 == .dataProtection } }

        var itemClass: ItemClass { tag != nil ? .key : server != nil ? .internetPassword : .genericPassword }

        /// What names it: its primary key's attributes, or a key's tag.
        var attributes: Attributes {
            if let tag { return [.applicationTag: .data(Data(tag.utf8))] }
            guard let server else { return [.account: .string(account), .service: .string(service)] }
            var attributes: Attributes = [.account: .string(account), .server: .string(server)]
            if let protocolCode { attributes[.protocol] = .string(protocolCode) }
            return attributes
        }

        /// The item's primary key, as an update or a delete gives it.
        var query: ItemQuery {
            ItemQuery(
                itemClass, attributes: attributes, accessGroup: group, synchronizable: synchronizable,
                useDataProtectionKeychain: useDataProtectionKeychain)
        }

        /// A read of its data, the user answering as `user` says (`passcode`: the device's own).
        func read(passcode: String?) -> ItemQuery {
            var query = query
            query.returning = .data
            query.authentication =
                switch user {
                case .none: .noInteraction
                case .face: .responding(.biometryMatch)
                case .wrongFace: .responding(.biometryNoMatch)
                case .cancel: .responding(.cancel)
                case .passcode: AuthenticationContext(responses: passcode.map { [.passcode($0)] } ?? [])
                }
            return query
        }
    }

    /// The key an `add` with a `tag:` makes.
    package struct KeySpec: Sendable {
        package var rsa: Bool
        package var bits: Int
        /// kSecAttrTokenIDSecureEnclave: never exported.
        package var secureEnclave: Bool
    }

    /// The simulated user, when an item's access control asks for them.
    package enum User: String, Sendable, CaseIterable {
        /// No prompt can be shown (the background): the read is errSecInteractionNotAllowed.
        case none
        /// An enrolled face or finger that matches.
        case face
        /// A face that does not match.
        case wrongFace = "wrong-face"
        /// The user cancels the prompt.
        case cancel
        /// The user types the device's passcode.
        case passcode
    }

    package enum Expectation: Sendable {
        case value(String)
        /// There, whatever its data: a key.
        case present
        case absent
        case status(KeychainStatus)
    }

    /// What a file under an app's Documents must be.
    package enum FileExpectation: Sendable {
        case text(String)
        case absent
        /// Present, but its protection class is unavailable in the lock state.
        case protected
    }

    package enum Action: Sendable {
        case lock(device: String, now: Bool)
        case unlock(device: String, passcode: String?)
        case reboot(String)
        case powerOff(String)
        case powerOn(String)
        case setPasscode(device: String, passcode: String)
        /// `held`: the removal must be held by Stolen Device Protection's Security Delay.
        case removePasscode(String, held: Bool)
        case security(device: String, protection: StolenDeviceProtection?, away: Bool?)
        case biometry(device: String, change: BiometryChange)
        case install(device: String, app: String)
        case uninstall(device: String, app: String)
        case reinstall(device: String, app: String)
        case transferTeam(device: String, app: String, team: String)
        case add(ItemRef, value: String, accessible: ProtectionClass?, accessControl: AccessControl?, expect: KeychainStatus?)
        /// A key made as SecKeyCreateRandomKey with kSecAttrIsPermanent makes one, tagged `item.tag`.
        case addKey(ItemRef, key: KeySpec, accessible: ProtectionClass?, accessControl: AccessControl?, expect: KeychainStatus?)
        case update(ItemRef, value: String, expect: KeychainStatus?)
        case delete(ItemRef, expect: KeychainStatus?)
        /// `group`, in the sandbox actions: the app group's container the app reaches.
        case defaults(device: String, app: String, group: String?, set: [String: String])
        case writeFile(device: String, app: String, group: String?, path: String, text: String, protection: FileProtection?)
        case removeFile(device: String, app: String, group: String?, path: String)
        case sync([String])
        /// `phone`: as a real iPhone's backup folder (`--format ios`) rather than Keyferry's archive.
        case backup(device: String, archive: String, encrypted: Bool, phone: Bool)
        case restore(archive: String, to: String)
        case transfer(from: String, to: String)
        case wait(TimeInterval, devices: [String])
        case expect(ItemRef, Expectation)
        case expectDefaults(device: String, app: String, group: String?, key: String, value: String?)
        case expectFile(device: String, app: String, group: String?, path: String, FileExpectation)
        case expectReport(String)
        /// `onSimulator`: the cell of the device's Simulator twin (`survival --compare simulator`).
        case expectSurvival(
            device: String, app: String?, secret: String, path: SurvivalPath, outcome: SurvivalCell.Outcome,
            status: KeychainStatus?, reason: String?, onSimulator: Bool)
    }

    package enum BiometryChange: String, Sendable {
        case enroll, reenroll, remove
    }

    /// The name as a file name: lower-case letters and digits, `-` for the rest.
    package var slug: String { Self.slug(name) }

    private static func slug(_ name: String) -> String {
        let slug = String(name.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" }.prefix(40))
        return slug.isEmpty ? "scenario" : slug
    }

    package static let actions = [
        "lock", "unlock", "reboot", "power-off", "power-on", "passcode-set", "passcode-change", "passcode-remove",
        "biometry-enroll", "biometry-reenroll", "biometry-remove", "security", "install", "uninstall", "reinstall", "transfer-team",
        "add", "update", "delete", "defaults", "file", "remove-file", "sync", "backup", "restore", "transfer", "wait",
        "expect", "expect-defaults", "expect-file", "expect-restore", "expect-survival",
    ]

    /// Reads and checks a scenario file; `displayName` names it in errors (default: the path).
    package static func load(_ url: URL, displayName: String? = nil) throws -> Scenario {
        let file = displayName ?? url.relativePath
        let text = try YAMLFile.text(of: url, file: file, kind: "scenario file")
        return try Scenario(yaml: text, file: file, directory: url.deletingLastPathComponent())
    }

    /// Parses scenario YAML; a `fleet:` path is read relative to `directory`.
    package init(yaml: String, file: String, directory: URL) throws {
        let document = try YAMLFile.top(yaml, file: file, kind: "scenario file", needs: "`scenario:` (its name) and `steps:`")
        let top = try document.fields(allowed: ["scenario", "source", "fleet", "apps", "devices", "sync", "items", "steps"])
        guard let nameField = top["scenario"] else { throw document.failure("missing `scenario:`, the scenario's name.") }
        name = try nameField.text()
        self.file = file
        source = try top["source"]?.text()
        if let fleetField = top["fleet"] {
            for inline in ["apps", "devices", "sync"] where top[inline] != nil {
                throw top[inline]!.keyFailure("give the devices either inline or as a `fleet:` file, not both.")
            }
            let path = try fleetField.text()
            let url = try Self.fleetFile(path, in: directory, field: fleetField)
            do {
                fleet = try FleetFile.load(url, displayName: path)
            } catch let error as FleetFileError {
                throw fleetField.failure("the fleet file does not load: \(error)")
            }
        } else {
            fleet = try FleetFile(name: Self.slug(name), fields: top, in: document)
        }
        var parser = StepParser(fleet: fleet)
        var steps: [Step] = []
        guard let stepsField = top["steps"] else { throw document.failure("missing `steps:`, what happens and what must hold.") }
        let items = try top["items"]?.list() ?? []
        let listed = try stepsField.list()
        guard items.count + listed.count <= Self.maximumSteps else {
            throw stepsField.failure("\(items.count + listed.count) items and steps; a scenario holds at most \(Self.maximumSteps).")
        }
        // Every item and step is checked, and every mistake reported at once.
        var problems: [FleetFileError] = []
        for (item, isItem) in items.map({ ($0, true) }) + listed.map({ ($0, false) }) where problems.count < FleetFileErrors.shown {
            do {
                steps.append(try isItem ? parser.step("add", item, line: item.line) : parser.step(item))
            } catch let error as FleetFileError {
                problems.append(error)
            }
        }
        // An item whose add was refused would also read as never added: said once, above.
        if problems.isEmpty { problems = parser.unreferenced() }
        try FleetFileErrors.throwIfAny(problems)
        self.steps = steps
    }
}

extension Scenario {
    /// Far more than a scenario a person reads; bounds what a shared file can make a run do.
    package static let maximumSteps = 10_000

    /// `fleet:` names a YAML file beside or below the scenario: a relative path without `..`,
    /// ending in `.yaml` or `.yml`, still inside the scenario's directory once symbolic links
    /// are followed. Anything else, such as a credential file, is never opened.
    static func fleetFile(_ path: String, in directory: URL, field: YAMLField) throws -> URL {
        guard !path.hasPrefix("/"), !path.split(separator: "/").contains(".."),
            path.hasSuffix(".yaml") || path.hasSuffix(".yml")
        else {
            throw field.failure("a fleet file is a .yaml or .yml file beside or below the scenario, named by a relative path without '..'.")
        }
        let base = directory.resolvingSymlinksInPath().standardizedFileURL.path
        let url = directory.appendingPathComponent(path)
        let resolved = url.resolvingSymlinksInPath().standardizedFileURL.path
        guard resolved.hasPrefix(base.hasSuffix("/") ? base : base + "/") else {
            throw field.failure("the fleet file leads outside the scenario's directory through a symbolic link.")
        }
        return url
    }
}

extension YAMLField {
    /// The elements of a list.
    func list() throws -> [YAMLField] {
        guard let sequence = node.sequence else { throw failure("expected a list, found \(kind).") }
        return sequence.enumerated().map { YAMLField(node: $1, path: "\(path)[\($0)]", file: file) }
    }

    /// 1-based, as editors count.
    var line: Int { node.mark?.line ?? 0 }
}
