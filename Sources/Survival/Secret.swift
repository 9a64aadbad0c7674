import Backup
import Foundation
import KeychainModel
import KeychainStore

/// One secret of the matrix and how to read it on any device: a keychain item by its primary
/// key, as its app searches for it; a UserDefaults entry; a sandbox file.
struct Secret: Sendable {
    enum Locator: Sendable {
        case item(ItemRecord)
        case defaults(bundleID: String, key: String)
        case file(bundleID: String, path: String)
    }

    var row: SurvivalRow
    let locator: Locator
    /// What reading it on the device as it is now gave: the baseline every path compares with.
    var baseline: Reading

    var uuid: UUID? {
        if case .item(let record) = locator { return record.uuid }
        return nil
    }

    /// What one read gave.
    enum Reading: Sendable, Equatable {
        case value(Data)
        case missing
        /// There, but the read failed: Apple's status for a keychain item, and the sentence.
        case failed(KeychainStatus?, String)
    }

    /// Every secret on `device` (a fork of the device as it is now), read once for the baseline,
    /// and the items whose rows are damaged, which no path can read (left out, named).
    static func all(on device: Device, app: String?, passcode: String?) throws -> (secrets: [Secret], damaged: [DamagedItem]) {
        let apps = try device.installedApps().filter { app == nil || $0.bundleID == app }
        let scope = try app.map { Set(try device.app($0).entitledGroups) }
        var secrets: [Secret] = []
        let listing = try device.deviceKeychain.list()
        for record in listing.items where scope?.contains(record.accessGroup) ?? true {
            // A Mac's file-based item is its app's alone.
            let reader = MacKeychain.app(ofFileBasedGroup: record.accessGroup) ?? apps.first { $0.entitledGroups.contains(record.accessGroup) }?.bundleID
            let row = SurvivalRow(
                kind: .keychainItem, name: Self.name(of: record), app: reader, itemClass: record.itemClass.name,
                accessible: record.protection.name, synchronizable: record.synchronizable, accessGroup: record.accessGroup,
                accessControl: record.accessControl?.expression.nilIfEmpty, fileProtection: nil, cells: [:])
            secrets.append(Secret(row: row, locator: .item(record), baseline: .missing))
        }
        // The apps' sandboxes, then the app groups' containers, read as the first app of the group.
        let groups = Set(apps.flatMap(\.appGroups)).sorted()
        let containers =
            try apps.map { (try device.sandbox(for: $0.bundleID), $0.bundleID) }
            + groups.map { group in (try device.container(group), apps.first { $0.appGroups.contains(group) }!.bundleID) }
        for (sandbox, reader) in containers {
            let prefix = sandbox.isGroupContainer ? "\(sandbox.bundleID) " : ""
            for key in try sandbox.defaults().keys.sorted() {
                let row = SurvivalRow(kind: .userDefaults, name: "\(prefix)UserDefaults \(key)", app: reader, cells: [:])
                secrets.append(Secret(row: row, locator: .defaults(bundleID: sandbox.bundleID, key: key), baseline: .missing))
            }
            for file in try sandbox.files() {
                let row = SurvivalRow(
                    kind: .sandboxFile, name: sandbox.isGroupContainer ? "\(sandbox.bundleID)/\(file.path)" : "Documents/\(file.path)",
                    app: reader, fileProtection: file.protection.rawValue, cells: [:])
                secrets.append(Secret(row: row, locator: .file(bundleID: sandbox.bundleID, path: file.path), baseline: .missing))
            }
        }
        let reader = Reader(device, passcode: passcode)
        let read = secrets.map { secret in
            var secret = secret
            secret.baseline = secret.read(with: reader)
            if case .failed(let status, let message) = secret.baseline {
                secret.row.now = SurvivalCell(.unreadable, status: status, reason: message)
            }
            return secret
        }
        return (read, listing.damaged)
    }

    /// `account @ service` as a restore report names it, else the class and a short id.
    private static func name(of record: ItemRecord) -> String {
        ArchivedItem.name { record.attributes[$0] } ?? "\(record.itemClass.name) \(record.uuid.uuidString.prefix(8))"
    }

    /// How secrets are read on one device: each installed app's keychain, entitled groups and
    /// sandbox, looked up once rather than for every secret; and the user answering every
    /// prompt (a face that matches, and the device's passcode when there is one).
    struct Reader {
        let device: Device
        let apps: [String: (keychain: Keychain, groups: Set<String>, sandbox: Sandbox)]
        /// The app groups' containers on the device, by group.
        let containers: [String: Sandbox]
        let authentication: AuthenticationContext

        init(_ device: Device, passcode: String?) {
            self.device = device
            let installed = (try? device.installedApps()) ?? []
            apps = Dictionary(
                uniqueKeysWithValues: installed.compactMap { app in
                    guard let keychain = try? device.keychain(for: app.bundleID), let sandbox = try? device.sandbox(for: app.bundleID) else { return nil }
                    return (app.bundleID, (keychain, Set(app.entitledGroups), sandbox))
                })
            containers = Dictionary(
                uniqueKeysWithValues: ((try? device.groupContainers()) ?? []).compactMap { group in (try? device.container(group)).map { (group, $0) } })
            authentication = AuthenticationContext(responses: [.biometryMatch] + (passcode.map { [.passcode($0)] } ?? []))
        }

        /// An app's sandbox, or an app group's container.
        func sandbox(_ name: String) -> Sandbox? { apps[name]?.sandbox ?? containers[name] }
    }

    /// Reads the secret as its app would.
    func read(with reader: Reader) -> Reading {
        switch locator {
        case .item(let record): return Self.readItem(record, app: row.app, with: reader)
        case .defaults(let bundleID, let key):
            guard let sandbox = reader.sandbox(bundleID) else { return .missing }
            guard sandbox.defaultsAreReadable else {
                return .failed(nil, "UserDefaults cannot be read before first unlock (completeUntilFirstUserAuthentication)")
            }
            guard let value = (try? sandbox.defaults())?[key] else { return .missing }
            let encoded = try? PropertyListSerialization.data(fromPropertyList: [key: value], format: .binary, options: 0)
            return .value(encoded ?? Data())
        case .file(let bundleID, let path):
            guard let sandbox = reader.sandbox(bundleID) else { return .missing }
            do {
                return .value(try sandbox.readFile(path))
            } catch let error as DeviceError where error.code == .protectedDataUnavailable {
                return .failed(nil, error.message)
            } catch {
                return .missing
            }
        }
    }

    private static func readItem(_ record: ItemRecord, app: String?, with reader: Reader) -> Reading {
        let keychain: Keychain
        let fileBased = record.macKeychain == .fileBased
        if let app, let installed = reader.apps[app] {
            // An app's search never reaches a group it is not entitled to: not found, for it.
            guard fileBased || installed.groups.contains(record.accessGroup) else { return .missing }
            keychain = installed.keychain
        } else {
            keychain = reader.device.deviceKeychain
        }
        let primaryKey = Dictionary(
            uniqueKeysWithValues: record.itemClass.primaryKey.compactMap { key in
                record.attributes[key].map { (key, $0) }
            })
        // On a Mac, in the one keychain the item is in (other devices ignore the key).
        let query = ItemQuery(
            record.itemClass, attributes: primaryKey, accessGroup: fileBased && app != nil ? nil : record.accessGroup,
            synchronizable: record.synchronizable ? .yes : .no, matchLimit: .one,
            returning: [.data], authentication: reader.authentication, useDataProtectionKeychain: !fileBased)
        do {
            return .value(try keychain.copy(query).first?.data ?? Data())
        } catch let error as KeychainError where error.status == .itemNotFound {
            return .missing
        } catch let error as KeychainError {
            return .failed(error.status, error.message)
        } catch {
            return .failed(nil, "\(error)")
        }
    }

    /// What a path did to this secret, compared with the baseline.
    func cell(with reader: Reader) -> SurvivalCell {
        let now = read(with: reader)
        switch (baseline, now) {
        case (_, .missing): return SurvivalCell(.lost)
        case (.value(let before), .value(let after)):
            return before == after ? SurvivalCell(.kept) : SurvivalCell(.lost, reason: "its value changed")
        case (.failed(let before, let message), .failed(let after, _)) where before == after:
            // Unreadable here as on the device itself: the path changed nothing, but the secret
            // is not one the app can read, and the matrix must not call it kept.
            return SurvivalCell(.unreadable, status: after, reason: message)
        case (_, .failed(let status, let message)):
            return SurvivalCell(.unreadable, status: status, reason: message)
        case (_, .value):
            return SurvivalCell(.kept)
        }
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
