import Fleet
import Foundation
import KeychainModel
import Survival
import Yams

/// Reads steps one by one, checking every name against what the scenario declares: devices and
/// apps from its fleet, archives made by earlier backups, items added somewhere in it.
struct StepParser {
    let fleet: FleetFile
    private var archives: Set<String> = []
    private var added: Set<String> = []
    /// Expectations about items, checked against `added` once every step is read.
    private var expected: [(key: String, field: YAMLField)] = []

    init(fleet: FleetFile) {
        self.fleet = fleet
    }

    /// One step: a mapping of one action to its arguments.
    mutating func step(_ field: YAMLField) throws -> Scenario.Step {
        let entries = try field.entries(allowed: Scenario.actions)
        guard entries.count == 1, let (name, value) = entries.first else {
            throw field.failure("a step is one action, such as `lock: phone`; found \(entries.count).")
        }
        return try step(name, value, line: field.line)
    }

    mutating func step(_ name: String, _ value: YAMLField, line: Int) throws -> Scenario.Step {
        let (action, summary) = try action(name, value)
        return Scenario.Step(line: line, action: action, summary: summary)
    }

    /// Each expectation about an item no step adds.
    func unreferenced() -> [FleetFileError] {
        expected.filter { !added.contains($0.key) }.map { key, field in
            field.failure("no step adds this item (\(key)); add it under `items:` or with an `add:` step first.")
        }
    }

    // MARK: Actions

    private mutating func action(_ name: String, _ value: YAMLField) throws -> (Scenario.Action, String) {
        switch name {
        case "lock":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "now"])
            let now = try fields["now"]?.bool() ?? false
            return (.lock(device: device, now: now), "lock \(device)" + (now ? " now" : ""))
        case "unlock":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "passcode"])
            return (.unlock(device: device, passcode: try fields["passcode"]?.text()), "unlock \(device)")
        case "reboot":
            let device = try deviceOnly(value)
            return (.reboot(device), "reboot \(device)")
        case "power-off":
            let device = try deviceOnly(value)
            return (.powerOff(device), "power off \(device)")
        case "power-on":
            let device = try deviceOnly(value)
            return (.powerOn(device), "power on \(device)")
        case "passcode-set", "passcode-change":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "passcode"], required: ["passcode"])
            let passcode = try fields["passcode"]!.text()
            try fields["passcode"]!.check { if passcode.isEmpty { throw DeviceError(.invalidArgument, "a passcode cannot be empty.") } }
            return (.setPasscode(device: device, passcode: passcode), "\(name == "passcode-set" ? "set" : "change") the passcode of \(device)")
        case "passcode-remove":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "held"])
            let held = try fields["held"]?.bool() ?? false
            return (.removePasscode(device, held: held), "remove the passcode of \(device)" + (held ? ", which the Security Delay holds" : ""))
        case "security":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "stolen-device-protection", "away"])
            let protection = try fields["stolen-device-protection"].map { field in
                guard let mode = StolenDeviceProtection(rawValue: try field.text()) else {
                    throw field.failure("`stolen-device-protection:` is off, away or always.")
                }
                return mode
            }
            let away = try fields["away"]?.bool()
            guard protection != nil || away != nil else { throw value.failure("give `stolen-device-protection:`, `away:`, or both.") }
            if let member = fleet.members.first(where: { $0.id == device }), member.profile.stolenDeviceProtection == nil {
                throw value.failure("\(device) behaves as \(member.profile.rawValue), which has no Stolen Device Protection (an iPhone on iOS 17.3 or later).")
            }
            let parts = [protection.map { "Stolen Device Protection \($0.rawValue)" }, away.map { $0 ? "away" : "at a familiar location" }].compactMap { $0 }
            return (.security(device: device, protection: protection, away: away), "\(device): " + parts.joined(separator: ", "))
        case "biometry-enroll", "biometry-reenroll", "biometry-remove":
            let device = try deviceOnly(value)
            let change = Scenario.BiometryChange(rawValue: String(name.dropFirst("biometry-".count)))!
            return (.biometry(device: device, change: change), "\(change.rawValue) biometry on \(device)")
        case "install", "uninstall", "reinstall":
            let (device, app) = try deviceApp(value)
            let action: Scenario.Action =
                name == "install"
                ? .install(device: device, app: app)
                : name == "uninstall" ? .uninstall(device: device, app: app) : .reinstall(device: device, app: app)
            return (action, "\(name) \(app) on \(device)")
        case "transfer-team":
            let (device, app, fields) = try deviceApp(value, extra: ["team"], required: ["team"])
            let team = try fields["team"]!.text()
            try fields["team"]!.check { try AppManifest.validate(teamID: team) }
            return (.transferTeam(device: device, app: app, team: team), "transfer \(app) on \(device) to team \(team)")
        case "add":
            let (item, fields) = try itemRef(value, extra: ["value", "accessible", "access-control", "status", "key-type", "bits", "secure-enclave"])
            let accessible = try fields["accessible"].map(protection)
            let accessControl = try fields["access-control"].map { field in
                try accessControlValue(field, protection: accessible ?? .whenUnlocked)
            }
            added.insert(key(item))
            let expected = try fields["status"].map(status)
            if item.tag != nil {
                if let field = fields["value"] { throw field.failure("a key's data is the key it makes; leave `value:` out.") }
                let key = try keySpec(fields, in: value)
                return (
                    .addKey(item, key: key, accessible: accessControl == nil ? accessible : nil, accessControl: accessControl, expect: expected),
                    "make \(key.secureEnclave ? "a Secure Enclave" : key.rsa ? "an RSA-\(key.bits)" : "a P-\(key.bits)") \(describe(item))"
                        + (accessible.map { " (\($0.name))" } ?? "") + failing(expected)
                )
            }
            for field in ["key-type", "bits", "secure-enclave"] where fields[field] != nil {
                throw fields[field]!.failure("`\(field):` is for a key, named by `tag:`.")
            }
            guard fields["value"] != nil else { throw value.failure("missing `value:`, the secret to add.") }
            return (
                .add(
                    item, value: try fields["value"]!.text(), accessible: accessControl == nil ? accessible : nil,
                    accessControl: accessControl, expect: expected),
                "add \(describe(item))" + (accessible.map { " (\($0.name))" } ?? "") + failing(expected)
            )
        case "update":
            let (item, fields) = try itemRef(value, extra: ["value", "status"], required: ["value"])
            let expected = try fields["status"].map(status)
            return (.update(item, value: try fields["value"]!.text(), expect: expected), "update \(describe(item))" + failing(expected))
        case "delete":
            let (item, fields) = try itemRef(value, extra: ["status"])
            let expected = try fields["status"].map(status)
            return (.delete(item, expect: expected), "delete \(describe(item))" + failing(expected))
        case "defaults":
            let (device, app, fields) = try deviceApp(value, extra: ["set", "app-group"], required: ["set"])
            let set = try fields["set"]!.entries().map { ($0.key, try $0.value.text()) }
            let group = try appGroup(fields, app: app)
            return (
                .defaults(device: device, app: app, group: group, set: Dictionary(set, uniquingKeysWith: { $1 })),
                "set UserDefaults \(set.map(\.0).joined(separator: ", ")) of \(group.map { "the suite \($0) as " } ?? "")\(app) on \(device)"
            )
        case "file":
            let (device, app, fields) = try deviceApp(value, extra: ["path", "text", "protection", "app-group"], required: ["path", "text"])
            let path = try fields["path"]!.text()
            let group = try appGroup(fields, app: app)
            let protection = try fields["protection"].map { field in
                let text = try field.text()
                guard let protection = FileProtection(rawValue: text) else {
                    throw field.failure(
                        "'\(text)' is not a file protection class; expected one of: \(FileProtection.allCases.map(\.rawValue).joined(separator: ", ")).")
                }
                return protection
            }
            return (
                .writeFile(device: device, app: app, group: group, path: path, text: try fields["text"]!.text(), protection: protection),
                "write \(group ?? "Documents")/\(path) as \(app) on \(device)" + (protection.map { " (\($0.rawValue))" } ?? "")
            )
        case "remove-file":
            let (device, app, fields) = try deviceApp(value, extra: ["path", "app-group"], required: ["path"])
            let path = try fields["path"]!.text()
            let group = try appGroup(fields, app: app)
            return (.removeFile(device: device, app: app, group: group, path: path), "remove \(group ?? "Documents")/\(path) as \(app) on \(device)")
        case "sync":
            let devices = value.node.scalar != nil ? [try device(value)] : try value.list().map(device)
            guard fleet.relay != nil else { throw value.failure("the scenario's devices are in no circle; add `sync: {relay: auto}` to the scenario.") }
            return (.sync(devices), "sync \(devices.joined(separator: ", "))")
        case "backup":
            let (device, fields) = try deviceAnd(value, allowed: ["device", "archive", "encrypted", "format"], required: ["archive"])
            let archiveField = fields["archive"]!
            let archive = try archiveField.text()
            guard archive.range(of: #"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"#, options: .regularExpression) != nil else {
                throw archiveField.failure(
                    "'\(archive)' cannot name an archive: it is a file of the scenario's own directory, named with letters, digits, '.', '-' and '_' (no '/').")
            }
            guard archives.insert(archive).inserted else {
                throw archiveField.failure("an earlier `backup:` step already makes archive '\(archive)'; give this one a name of its own.")
            }
            let encrypted = try fields["encrypted"]?.bool() ?? true
            let format = try fields["format"]?.text() ?? "keyferry"
            guard ["keyferry", "ios"].contains(format) else {
                throw fields["format"]!.failure("'\(format)' is not a backup format; use keyferry (an archive) or ios (a real iPhone's backup folder).")
            }
            return (
                .backup(device: device, archive: archive, encrypted: encrypted, phone: format == "ios"),
                "back up \(device) to \(archive) (\(encrypted ? "encrypted" : "unencrypted")\(format == "ios" ? ", as an iOS backup" : ""))"
            )
        case "restore":
            let fields = try value.fields(allowed: ["archive", "to"])
            let archive = try required("archive", fields, value).text()
            guard archives.contains(archive) else {
                throw fields["archive"]!.failure("no earlier `backup:` step makes archive '\(archive)'.")
            }
            let target = try device(required("to", fields, value))
            return (.restore(archive: archive, to: target), "restore \(archive) onto \(target)")
        case "transfer":
            let fields = try value.fields(allowed: ["from", "to"])
            let source = try device(required("from", fields, value))
            let target = try device(required("to", fields, value))
            guard source != target else { throw value.failure("Quick Start moves a device onto another one; `from` and `to` are both \(source).") }
            return (.transfer(from: source, to: target), "Quick Start from \(source) to \(target)")
        case "wait":
            if value.node.scalar != nil {
                let span = try value.duration()
                return (.wait(span, devices: fleet.members.map(\.id)), "wait \(try value.text())")
            }
            let fields = try value.fields(allowed: ["for", "devices"])
            let span = try required("for", fields, value).duration()
            let devices = try fields["devices"].map { field in try field.texts().map { try checkDevice($0, field) } } ?? fleet.members.map(\.id)
            return (.wait(span, devices: devices), "wait \(try fields["for"]!.text()) on \(devices.joined(separator: ", "))")
        case "expect":
            let (item, fields) = try itemRef(value, extra: ["value", "present", "absent", "status"])
            let given = ["value", "present", "absent", "status"].filter { fields[$0] != nil }
            guard given.count == 1 else { throw value.failure("expect exactly one of `value:`, `present: true`, `absent: true` or `status:`.") }
            expected.append((key(item), value))
            let expectation: Scenario.Expectation
            if let field = fields["value"] {
                if item.tag != nil { throw field.failure("a key's data is the key itself; expect `present: true`, `absent: true` or `status:`.") }
                expectation = .value(try field.text())
            } else if let field = fields["present"] {
                guard try field.bool() else { throw field.failure("`present:` is true; for the opposite, `absent: true`.") }
                expectation = .present
            } else if let field = fields["absent"] {
                guard try field.bool() else { throw field.failure("`absent:` is true, or left out.") }
                expectation = .absent
            } else {
                expectation = .status(try status(fields["status"]!))
            }
            let wanted =
                switch expectation {
                case .value(let text): "= \"\(text)\""
                case .present: "present"
                case .absent: "absent"
                case .status(let status): status.name
                }
            return (.expect(item, expectation), "expect \(describe(item)) \(wanted)")
        case "expect-defaults":
            let (device, app, fields) = try deviceApp(value, extra: ["key", "value", "absent", "app-group"], required: ["key"])
            let key = try fields["key"]!.text()
            let group = try appGroup(fields, app: app)
            let expectedValue = try fields["value"]?.text()
            if expectedValue == nil, try fields["absent"]?.bool() != true { throw value.failure("expect `value:` or `absent: true`.") }
            return (
                .expectDefaults(device: device, app: app, group: group, key: key, value: expectedValue),
                "expect UserDefaults \(key) of \(group.map { "the suite \($0) as " } ?? "")\(app) on \(device) "
                    + (expectedValue.map { "= \"\($0)\"" } ?? "absent")
            )
        case "expect-file":
            let (device, app, fields) = try deviceApp(value, extra: ["path", "text", "absent", "protected", "app-group"], required: ["path"])
            let path = try fields["path"]!.text()
            let group = try appGroup(fields, app: app)
            let given = ["text", "absent", "protected"].filter { fields[$0] != nil }
            guard given.count == 1 else { throw value.failure("expect exactly one of `text:`, `absent: true` or `protected: true`.") }
            let expectation: Scenario.FileExpectation
            if let field = fields["text"] {
                expectation = .text(try field.text())
            } else {
                let field = fields[given[0]]!
                guard try field.bool() else { throw field.failure("`\(given[0]):` is true, or left out.") }
                expectation = given[0] == "absent" ? .absent : .protected
            }
            let wanted =
                switch expectation {
                case .text(let text): "= \"\(text)\""
                case .absent: "absent"
                case .protected: "protected"
                }
            return (
                .expectFile(device: device, app: app, group: group, path: path, expectation),
                "expect \(group ?? "Documents")/\(path) as \(app) on \(device) \(wanted)"
            )
        case "expect-restore":
            let text = try value.text()
            return (.expectReport(text), "expect the last restore or transfer to report \"\(text)\"")
        case "expect-survival":
            let fields = try value.fields(allowed: ["device", "app", "secret", "path", "outcome", "status", "reason", "on"])
            let onSimulator =
                try fields["on"].map { field in
                    guard try field.text() == "simulator" else {
                        throw field.failure("`on:` is simulator: the same secrets on the device's iOS Simulator twin, as the survival matrix compares them.")
                    }
                    return true
                } ?? false
            let device = try device(required("device", fields, value))
            let app = try fields["app"].map(appName)
            let secret = try required("secret", fields, value).text()
            let pathField = try required("path", fields, value)
            let pathName = try pathField.text()
            guard let path = SurvivalPath(rawValue: pathName) else {
                let paths = SurvivalPath.allCases.map(\.rawValue)
                let guess = Spelling.closest(to: pathName, among: paths).map { "did you mean \($0)? " } ?? ""
                throw pathField.failure("unknown path; \(guess)expected one of: \(paths.joined(separator: ", ")).")
            }
            let outcomeField = try required("outcome", fields, value)
            guard let outcome = SurvivalCell.Outcome(rawValue: try outcomeField.text()) else {
                throw outcomeField.failure("unknown outcome; expected kept, lost or unreadable.")
            }
            return (
                .expectSurvival(
                    device: device, app: app, secret: secret, path: path, outcome: outcome,
                    status: try fields["status"].map(status), reason: try fields["reason"]?.text(), onSimulator: onSimulator),
                "expect \(secret) on \(device)\(onSimulator ? "'s Simulator twin" : "") \(outcome.rawValue) after \(path.rawValue)"
            )
        default:
            throw value.keyFailure("unknown action.")
        }
    }

    // MARK: Arguments

    private func required(_ name: String, _ fields: [String: YAMLField], _ parent: YAMLField) throws -> YAMLField {
        guard let field = fields[name] else { throw parent.failure("missing `\(name):`.") }
        return field
    }

    @discardableResult
    private func checkDevice(_ id: String, _ field: YAMLField) throws -> String {
        guard fleet.members.contains(where: { $0.id == id }) else {
            throw field.failure("'\(id)' is not one of the scenario's devices (\(fleet.members.map(\.id).joined(separator: ", "))).")
        }
        return id
    }

    private func device(_ field: YAMLField) throws -> String { try checkDevice(try field.text(), field) }

    /// `lock: phone`, or `lock: {device: phone, ...}`.
    private func deviceAnd(_ value: YAMLField, allowed: [String], required names: [String] = []) throws -> (String, [String: YAMLField]) {
        if value.node.scalar != nil, names.isEmpty { return (try device(value), [:]) }
        let fields = try value.fields(allowed: allowed)
        for name in names { _ = try required(name, fields, value) }
        return (try device(required("device", fields, value)), fields)
    }

    private func deviceOnly(_ value: YAMLField) throws -> String { try deviceAnd(value, allowed: ["device"]).0 }

    private func appName(_ field: YAMLField) throws -> String {
        let app = try field.text()
        let known = Set(fleet.members.flatMap { $0.apps.map(\.bundleID) })
        guard known.contains(app) else {
            throw field.failure("'\(app)' is not among the scenario's apps (\(known.sorted().joined(separator: ", "))).")
        }
        return app
    }

    private func deviceApp(_ value: YAMLField) throws -> (String, String) {
        let (device, app, _) = try deviceApp(value, extra: [])
        return (device, app)
    }

    private func deviceApp(_ value: YAMLField, extra: [String], required names: [String] = []) throws -> (String, String, [String: YAMLField]) {
        let fields = try value.fields(allowed: ["device", "app"] + extra)
        for name in names { _ = try required(name, fields, value) }
        return (try device(required("device", fields, value)), try appName(required("app", fields, value)), fields)
    }

    /// `app-group:`, an app group the app is entitled to in the scenario's apps.
    private func appGroup(_ fields: [String: YAMLField], app: String) throws -> String? {
        guard let field = fields["app-group"] else { return nil }
        let group = try field.text()
        let manifest = fleet.members.lazy.flatMap(\.apps).first { $0.bundleID == app }
        guard manifest?.appGroups.contains(group) == true else {
            throw field.failure("\(app) is not entitled to the app group '\(group)'; add it to the app's `groups:`.")
        }
        return group
    }

    /// An item a step names: a generic password by `account` (and `service`), an internet
    /// password by `account` and `server` (and `protocol`), a key by its `tag`.
    private func itemRef(_ value: YAMLField, extra: [String], required names: [String] = []) throws -> (Scenario.ItemRef, [String: YAMLField]) {
        let (device, app, fields) = try deviceApp(
            value, extra: ["account", "service", "server", "protocol", "tag", "group", "sync", "user", "keychain"] + extra, required: names)
        if fields["tag"] != nil {
            if let other = ["account", "service", "server", "protocol"].first(where: { fields[$0] != nil }) {
                throw fields[other]!.failure("a key is named by its `tag:` alone; `\(other):` names a password.")
            }
        } else if fields["account"] == nil {
            throw value.failure("missing `account:` (or `tag:` for a key).")
        }
        if fields["server"] != nil, let service = fields["service"] {
            throw service.failure("an internet password is named by `server:` (and `protocol:`), not `service:`.")
        }
        if fields["protocol"] != nil, fields["server"] == nil, let field = fields["protocol"] {
            throw field.failure("`protocol:` goes with `server:`, for an internet password.")
        }
        let protocolCode = try fields["protocol"].map { field in
            let text = try field.text()
            guard let code = InternetProtocol.code(for: text) else {
                throw field.failure("'\(text)' is not one of Apple's kSecAttrProtocol values; use a name such as HTTPS, SSH or IMAPS.")
            }
            return code
        }
        let user =
            try fields["user"].map { field in
                guard let user = Scenario.User(rawValue: try field.text()) else {
                    throw field.failure("the user does one of: \(Scenario.User.allCases.map(\.rawValue).joined(separator: ", ")).")
                }
                return user
            } ?? .none
        let sync: SynchronizableMatch
        switch try fields["sync"].map({ field in (field, try field.node.bool.map { $0 ? "yes" : "no" } ?? field.text()) }) {
        case nil: sync = .no
        case (_, "yes")?: sync = .yes
        case (_, "no")?: sync = .no
        case (_, "any")?: sync = .any
        case (let field, _)?: throw field.failure("`sync:` is true, false or any.")
        }
        var item = Scenario.ItemRef(
            device: device, app: app, account: try fields["account"]?.text() ?? "",
            service: try fields["service"]?.text() ?? app, synchronizable: sync,
            group: try fields["group"]?.text(), user: user,
            keychain: try fields["keychain"].map { field in
                guard let keychain = MacKeychain(rawValue: try field.text()) else {
                    throw field.failure("`keychain:` is \(MacKeychain.allCases.map(\.rawValue).joined(separator: " or ")), a Mac's two keychains.")
                }
                return keychain
            })
        item.server = try fields["server"]?.text()
        item.protocolCode = protocolCode
        item.tag = try fields["tag"]?.text()
        return (item, fields)
    }

    /// An item as expectations name it: on any device (sync, restores) and from any app (shared
    /// access groups).
    private func key(_ item: Scenario.ItemRef) -> String { item.tag.map { "key \($0)" } ?? "\(item.account) @ \(item.server ?? item.service)" }

    /// `, which fails with errSecMissingEntitlement` for a call expected to fail.
    private func failing(_ status: KeychainStatus?) -> String { status.map { ", which fails with \($0.name)" } ?? "" }

    /// `alice on phone`; `alice @ api on phone as com.example.widget` where the service or
    /// the app is not the obvious one.
    private func describe(_ item: Scenario.ItemRef) -> String {
        let apps = Set(fleet.members.flatMap { $0.apps.map(\.bundleID) })
        let name =
            item.tag.map { "key \($0)" } ?? item.server.map { "\(item.account) @ \($0)" } ?? item.account
            + (item.service == item.app ? "" : " @ \(item.service)")
        return name + " on \(item.device)"
            + (item.keychain.map { " in the \($0.rawValue) keychain" } ?? "") + (apps.count > 1 ? " as \(item.app)" : "")
    }

    /// `key-type` (ec, the default, or rsa), `bits` and `secure-enclave`, checked as
    /// SecKeyCreateRandomKey checks them.
    private func keySpec(_ fields: [String: YAMLField], in value: YAMLField) throws -> Scenario.KeySpec {
        let type = try fields["key-type"]?.text() ?? "ec"
        guard type == "ec" || type == "rsa" else { throw fields["key-type"]!.failure("`key-type:` is ec or rsa, not '\(type)'.") }
        let rsa = type == "rsa"
        let bits =
            try fields["bits"].map { field in
                guard let bits = Int(try field.text()) else { throw field.failure("`bits:` is a whole number.") }
                return bits
            } ?? (rsa ? 2048 : 256)
        let valid = rsa ? (2048...4096).contains(bits) && bits % 128 == 0 : [256, 384, 521].contains(bits)
        guard valid else {
            throw (fields["bits"] ?? value).failure(
                rsa ? "an rsa key has 2048 to 4096 bits, in steps of 128." : "an ec key is on P-256, P-384 or P-521 (256, 384 or 521 bits).")
        }
        let secureEnclave = try fields["secure-enclave"]?.bool() ?? false
        if secureEnclave, rsa || bits != 256 {
            throw fields["secure-enclave"]!.failure("the Secure Enclave makes P-256 keys only (key-type: ec, bits: 256).")
        }
        return Scenario.KeySpec(rsa: rsa, bits: bits, secureEnclave: secureEnclave)
    }

    private func protection(_ field: YAMLField) throws -> ProtectionClass {
        let text = try field.text()
        guard let value = ProtectionClass(name: text) else {
            throw field.failure("'\(text)' is not an accessibility; expected one of: \(ProtectionClass.allCases.map(\.name).joined(separator: ", ")).")
        }
        return value
    }

    private func accessControlValue(_ field: YAMLField, protection: ProtectionClass) throws -> AccessControl {
        do {
            return try AccessControl(protection: protection, expression: try field.text())
        } catch let error as KeychainError {
            throw field.failure(error.message)
        }
    }

    private func status(_ field: YAMLField) throws -> KeychainStatus {
        let text = try field.text()
        if let code = Int32(text), KeychainStatus(rawValue: code).name != "OSStatus" { return KeychainStatus(rawValue: code) }
        guard let status = KeychainStatus(name: text) else {
            throw field.failure("'\(text)' is not a status Keyferry knows; expected one of: \(KeychainStatus.allNames.joined(separator: ", ")).")
        }
        return status
    }

}
