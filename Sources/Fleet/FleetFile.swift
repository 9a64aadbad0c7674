package import Foundation
package import KeychainModel
package import KeychainStore
package import Relay

/// What a fleet file describes: devices to run side by side on one machine, and the apps
/// installed on each. Pure values; `FleetRunner` brings them to life.
///
/// ```yaml
/// fleet: family
/// apps:
///   com.example.mail: { team: F4M1LY0001, groups: [F4M1LY0001.shared] }
/// devices:
///   phone:
///     name: Alice's iPhone
///     passcode: "123456"
///     biometry: true
///     apps: [com.example.mail]
///   sim:
///     profile: simulator
/// ```
package struct FleetFile: Equatable, Sendable {
    /// Names the fleet's default directory; letters, digits, `-` and `_`.
    package var name: String
    /// In file order.
    package var members: [Member]
    /// Where the fleet's relay listens, when the fleet syncs: every device joins one circle,
    /// created by the first. Port 0 (`relay: auto`) lets the first `up` pick a free port; the
    /// circle remembers it.
    package var relay: RelayAddress?
    /// Whether the fleet starts and stops that relay itself (in `ROOT/relay`), or syncs
    /// through one someone else runs: on another machine, or several relays on one database.
    package var runsRelay: Bool
    /// A circle made elsewhere (another machine's fleet or device) that every member asks to
    /// join through the relay, for a member of it to approve by code; nil: the first member
    /// creates the fleet's circle and vouches for the others.
    package var circle: UUID?
    /// The file it was read from, symbolic links resolved: where its devices are remembered
    /// to be, so that two checkouts of one fleet never share devices. nil for a fleet made
    /// otherwise (a scenario's).
    package var source: URL?

    /// One device of the fleet.
    package struct Member: Equatable, Sendable {
        /// The key under `devices:`: the device's directory under the fleet's root.
        package var id: String
        /// The device's own name (`Alice's iPhone`); the id when the file gives none.
        package var deviceName: String
        package var passcode: String?
        package var biometry: Bool
        /// Seconds class A keys stay in memory after the screen locks.
        package var grace: Double
        package var apps: [AppManifest]
        package var profile: DeviceProfile

        package init(
            id: String, deviceName: String, passcode: String?, biometry: Bool, grace: Double, apps: [AppManifest], profile: DeviceProfile = .iphone
        ) {
            self.profile = profile
            self.id = id
            self.deviceName = deviceName
            self.passcode = passcode
            self.biometry = biometry
            self.grace = grace
            self.apps = apps
        }

        /// How `Device.create` makes this member when its directory does not exist yet.
        package var deviceOptions: DeviceOptions {
            DeviceOptions(name: deviceName, passcode: passcode, enrollBiometry: biometry, gracePeriod: grace, profile: profile)
        }
    }

    /// Each device is a node process and an Argon2id passcode hash at creation: a file that
    /// asks for more is a mistake, or someone else's idea of a test.
    package static let maximumDevices = 32

    package init(name: String, members: [Member], relay: RelayAddress? = nil, runsRelay: Bool = true, circle: UUID? = nil) {
        self.name = name
        self.members = members
        self.relay = relay
        self.runsRelay = runsRelay
        self.circle = circle
    }

    /// Reads and checks a fleet file. Any problem is a `FleetFileError` naming the file (as
    /// `displayName`, default the path given), the line and the field.
    package static func load(_ url: URL, displayName: String? = nil) throws -> FleetFile {
        let file = displayName ?? url.relativePath
        var fleet = try FleetFile(yaml: try YAMLFile.text(of: url, file: file, kind: "fleet file"), file: file)
        fleet.source = url.standardizedFileURL.resolvingSymlinksInPath()
        return fleet
    }

    /// Parses fleet YAML; `file` names it in errors.
    package init(yaml: String, file: String) throws {
        let document = try YAMLFile.top(yaml, file: file, kind: "fleet file", needs: "`fleet:` (its name) and `devices:`")
        let top = try document.fields(allowed: ["fleet", "apps", "devices", "sync"])
        guard let nameField = top["fleet"] else { throw document.failure("missing `fleet:`, the fleet's name.") }
        let name = try nameField.text()
        guard name.range(of: #"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"#, options: .regularExpression) != nil else {
            throw nameField.failure("'\(name)' cannot name a fleet; use letters, digits, '-' and '_' (it names the fleet's directory).")
        }
        try self.init(name: name, fields: top, in: document)
    }

    /// A fleet from the `apps`, `devices` and `sync` fields of a larger document (a scenario).
    package init(name: String, fields top: [String: YAMLField], in document: YAMLField) throws {
        self.name = name

        // Each app and device is checked, and every mistake reported at once.
        var problems: [FleetFileError] = []
        func collecting(_ check: () throws -> Void) throws {
            do { try check() } catch let error as FleetFileError { problems.append(error) }
        }
        var catalog: [String: AppManifest] = [:]
        for (bundleID, field) in try top["apps"]?.entries() ?? [] {
            try collecting { try Self.app(bundleID, field, into: &catalog) }
        }
        for (bundleID, field) in try top["apps"]?.entries() ?? [] {
            guard let containing = catalog[bundleID]?.containingApp else { continue }
            guard let host = catalog[containing], host.containingApp == nil else {
                problems.append(field.failure("`extension-of: \(containing)` names no app of `apps:`; an extension ships inside an app listed there."))
                continue
            }
        }

        guard let devicesField = top["devices"] else { throw document.failure("missing `devices:`, the fleet's devices by directory name.") }
        let devices = try devicesField.entries()
        guard !devices.isEmpty else { throw devicesField.failure("a fleet needs at least one device.") }
        guard devices.count <= Self.maximumDevices else {
            throw devicesField.failure("\(devices.count) devices; a fleet holds at most \(Self.maximumDevices), each a node process.")
        }
        var members: [Member] = []
        for (id, field) in devices { try collecting { members.append(try Member(id: id, field: field, catalog: catalog)) } }
        try FleetFileErrors.throwIfAny(problems)
        self.members = members
        runsRelay = true
        try readSync(top["sync"])
    }

    /// One app of `apps:`, checked, into the catalog devices name apps from.
    private static func app(_ bundleID: String, _ field: YAMLField, into catalog: inout [String: AppManifest]) throws {
        let app = try field.fields(allowed: ["team", "groups", "extension-of"])
        guard let teamField = app["team"] else { throw field.failure("missing `team:`, the app's ten-character team ID.") }
        let team = try teamField.text()
        let groups = try app["groups"]?.texts() ?? []
        let containing = try app["extension-of"]?.text()
        try field.check(atKey: true) { try AppManifest.validate(bundleID: bundleID) }
        try teamField.check { try AppManifest.validate(teamID: team) }
        try app["groups"]?.check { try AppManifest.validate(accessGroups: groups, teamID: team) }
        if let containing { try app["extension-of"]?.check { try AppManifest.validate(extension: bundleID, of: containing) } }
        catalog[bundleID] = AppManifest(bundleID: bundleID, teamID: team, accessGroups: groups, containingApp: containing)
    }

    /// The relay and circle of `sync:`, once the members are known.
    private mutating func readSync(_ syncField: YAMLField?) throws {
        if let syncField {
            let sync = try syncField.fields(allowed: ["relay", "start", "circle"])
            guard let relayField = sync["relay"] else {
                throw syncField.failure("missing `relay:`, where the fleet's relay listens (auto, HOST:PORT, or an https:// relay it does not run).")
            }
            let text = try relayField.text()
            let start = try sync["start"].map { try $0.bool() }
            if text == "auto" {
                relay = .loopback(port: 0)
                if start == false { throw sync["start"]!.failure("`relay: auto` is a relay the fleet starts; name the relay to use instead.") }
            } else {
                guard let address = RelayAddress(text), address.port != 0 || start != false else {
                    throw relayField.failure(
                        "the relay is `auto` (one the fleet starts, on a free port of 127.0.0.1), HOST:PORT (one it starts there), "
                            + "or https://HOST:PORT (one someone else runs, such as 10.0.0.5:7700 behind TLS).")
                }
                if address.secure && start == true {
                    throw sync["start"]!.failure(
                        "a fleet starts its own relay over http only; an https:// relay is one someone else runs (leave out `start:`).")
                }
                relay = address
                runsRelay = start ?? !address.secure
                if runsRelay && !address.isLoopback {
                    throw relayField.failure(
                        "a fleet starts its own relay on loopback only (127.0.0.1:PORT), where it creates circles for anyone on this machine; "
                            + "for other machines run `keyferry relay serve --admission token FILE` and name it here with `start: false`.")
                }
            }
            if let circleField = sync["circle"] {
                guard let id = UUID(uuidString: try circleField.text()) else {
                    throw circleField.failure("the circle to join is its id, as `circle status` prints it on one of its members.")
                }
                guard !runsRelay else {
                    throw circleField.failure(
                        "a circle made elsewhere syncs through the relay it was made on: name that relay and add `start: false`.")
                }
                circle = id
            }
            if let simulator = members.first(where: { !$0.profile.hasICloudKeychain }) {
                throw syncField.failure(
                    "every device of a fleet that syncs joins its circle, and '\(simulator.id)' is an iOS Simulator, which has no iCloud Keychain; "
                        + "leave out `sync:` or give it another profile.")
            }
            if runsRelay, members.contains(where: { $0.id == "relay" }) {
                throw syncField.failure("a fleet that syncs keeps its relay in ROOT/relay; rename the device `relay`.")
            }
        }
    }
}

extension FleetFile.Member {
    fileprivate init(id: String, field: YAMLField, catalog: [String: AppManifest]) throws {
        guard id.range(of: #"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"#, options: .regularExpression) != nil else {
            throw field.keyFailure("'\(id)' cannot name a device directory; use letters, digits, '.', '-' and '_'.")
        }
        let fields = try field.fields(allowed: ["name", "profile", "passcode", "biometry", "grace", "apps"])
        self.id = id
        var profile = DeviceProfile.iphone
        if let profileField = fields["profile"] {
            let name = try profileField.text()
            try profileField.check { profile = try DeviceProfile(named: name) }
        }
        self.profile = profile
        deviceName = try fields["name"]?.text() ?? id
        passcode = try fields["passcode"]?.text()
        if let passcodeField = fields["passcode"], passcode?.isEmpty == true {
            throw passcodeField.failure("a passcode cannot be empty; leave the field out for a device without one.")
        }
        if let passcodeField = fields["passcode"], let passcode { try passcodeField.check { try Device.validatePasscode(passcode) } }
        if let passcodeField = fields["passcode"], !profile.hasPasscodeSetting {
            throw passcodeField.failure("the iOS Simulator has no passcode to set; leave the field out, or give the device another profile.")
        }
        biometry = try fields["biometry"]?.bool() ?? false
        if biometry, passcode == nil, !profile.reportsPasscodeSet, let biometryField = fields["biometry"] {
            throw biometryField.failure("biometry needs a passcode, as on iOS; give this device a passcode.")
        }
        grace = try fields["grace"]?.duration() ?? 10
        apps =
            try fields["apps"].map { field in
                try field.texts().map { bundleID in
                    if let app = catalog[bundleID] { return app }
                    let known = catalog.keys.sorted()
                    throw field.failure(
                        "'\(bundleID)' is not among the fleet's apps; "
                            + (known.isEmpty
                                ? "describe it under `apps:` first." : "expected one of \(known.joined(separator: ", ")), or describe it under `apps:`."))
                }
            } ?? []
        // An extension installs after its app, which the device must have too.
        if let field = fields["apps"],
            let orphan = apps.first(where: { app in app.containingApp.map { host in !apps.contains { $0.bundleID == host } } ?? false })
        {
            throw field.failure("\(orphan.bundleID) is an extension of \(orphan.containingApp!); list \(orphan.containingApp!) on this device too.")
        }
        apps = apps.filter { $0.containingApp == nil } + apps.filter { $0.containingApp != nil }
    }
}
