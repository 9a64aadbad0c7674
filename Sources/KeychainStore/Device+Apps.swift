public import Foundation
import GRDB
public import KeychainModel
import KeyferryThreads

extension Device {
    /// Installs an app, or updates an installed one (an update keeps the sandbox). Installing
    /// under another team ID is an app transfer: the app's new groups do not include the old
    /// ones, so items there become unreachable, as on iOS.
    public func install(_ app: AppManifest) throws {
        try app.validate()
        let apps = try installedApps()
        if let containing = app.containingApp {
            guard let host = apps.first(where: { $0.bundleID == containing }) else {
                throw DeviceError(
                    .appNotInstalled, "\(app.bundleID) is an extension of \(containing), which is not installed on \(info.name); install the app first.")
            }
            guard host.containingApp == nil else {
                throw DeviceError(.invalidArgument, "\(containing) is itself an extension; an extension ships inside an app.")
            }
        }
        let files = FileManager.default
        if !apps.contains(where: { $0.bundleID == app.bundleID }) {
            // A fresh install starts empty, even if an uninstall was cut short before its files went.
            try? files.removeItem(at: layout.sandbox(app.bundleID))
        }
        // So does a group container no installed app had.
        let held = Set(apps.flatMap(\.appGroups))
        let fresh = app.appGroups.filter { !held.contains($0) }
        if !fresh.isEmpty {
            try database.write { db in
                for group in fresh { try db.execute(sql: "DELETE FROM sandbox_file WHERE bundle_id = ?", arguments: [group]) }
            }
            for group in fresh { try? files.removeItem(at: layout.groupContainer(group)) }
        }
        do {
            try files.createDirectory(at: layout.documents(app.bundleID), withIntermediateDirectories: true)
            try files.createDirectory(at: layout.defaultsFile(app.bundleID).deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw DeviceError(.io, "could not create the sandbox of \(app.bundleID): \(error.localizedDescription)")
        }
        let groups = String(decoding: try JSONEncoder().encode(app.accessGroups), as: UTF8.self)
        defer { appCache.withLock { $0.forget() } }
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO app (bundle_id, team_id, access_groups, keychain_entitled, installed_at, containing_app, app_id_prefix, uikit_on_mac)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (bundle_id) DO UPDATE SET team_id = excluded.team_id,
                        access_groups = excluded.access_groups, keychain_entitled = excluded.keychain_entitled,
                        containing_app = excluded.containing_app, app_id_prefix = excluded.app_id_prefix, uikit_on_mac = excluded.uikit_on_mac
                    """,
                arguments: [
                    app.bundleID, app.teamID, groups, app.hasKeychainEntitlement, clock.now().timeIntervalSinceReferenceDate, app.containingApp,
                    app.appIDPrefix, app.uikitOnMac == true,
                ])
        }
    }

    /// Uninstalls an app with its extensions (an extension alone cannot be): their sandboxes
    /// (UserDefaults, Documents) are wiped, and so is every app group's container no remaining
    /// app is entitled to (app groups are counted); keychain items stay, as on iOS, and a
    /// reinstall finds them. The registry goes first: if the files outlive a crash here, the
    /// next install removes them.
    public func uninstall(bundleID: String) throws {
        let app = try app(bundleID)
        if let containing = app.containingApp {
            throw DeviceError(
                .invalidArgument, "\(bundleID) is an extension of \(containing) and goes when \(containing) is uninstalled; uninstall the app.")
        }
        try remove(bundleID)
    }

    /// Installs `app` with a fresh sandbox, as a restore does: what was installed under its
    /// bundle ID goes first, with its extensions (an extension alone, for an extension).
    public func installFresh(_ app: AppManifest) throws {
        try remove(app.bundleID)
        try install(app)
    }

    /// Removes an installed app and its extensions, if any, with their sandboxes, and the group
    /// containers no remaining app holds.
    private func remove(_ bundleID: String) throws {
        let installed = try installedApps()
        let leaving = installed.filter { $0.bundleID == bundleID || $0.containingApp == bundleID }
        guard !leaving.isEmpty else { return }
        let staying = installed.filter { stay in !leaving.contains { $0.bundleID == stay.bundleID } }
        let orphaned = Set(leaving.flatMap(\.appGroups)).filter { group in !staying.contains { $0.appGroups.contains(group) } }.sorted()
        defer { appCache.withLock { $0.forget() } }
        try database.write { db in
            for gone in leaving { try db.execute(sql: "DELETE FROM app WHERE bundle_id = ?", arguments: [gone.bundleID]) }
            for owner in leaving.map(\.bundleID) + orphaned {
                try db.execute(sql: "DELETE FROM sandbox_file WHERE bundle_id = ?", arguments: [owner])
            }
        }
        for gone in leaving { try? FileManager.default.removeItem(at: layout.sandbox(gone.bundleID)) }
        for group in orphaned { try? FileManager.default.removeItem(at: layout.groupContainer(group)) }
    }

    public func installedApps() throws -> [AppManifest] {
        try database.unsafeRead { db in
            try Row.fetchAll(db, sql: "SELECT * FROM app ORDER BY bundle_id").map(Self.manifest)
        }
    }

    public func app(_ bundleID: String) throws -> AppManifest {
        let (generation, known) = appCache.withLock { ($0.generation, $0.manifests[bundleID]) }
        if let known { return known }
        guard let row = try database.unsafeRead({ try Row.fetchOne($0, sql: "SELECT * FROM app WHERE bundle_id = ?", arguments: [bundleID]) }) else {
            throw DeviceError(.appNotInstalled, "\(bundleID) is not installed on \(info.name).", subject: directory.path)
        }
        let manifest = try Self.manifest(row)
        appCache.withLock { if $0.generation == generation { $0.manifests[bundleID] = manifest } }
        return manifest
    }

    private static func manifest(_ row: Row) throws -> AppManifest {
        let groups = try JSONDecoder().decode([String].self, from: Data((row["access_groups"] as String).utf8))
        return AppManifest(
            bundleID: row["bundle_id"], teamID: row["team_id"], accessGroups: groups,
            hasKeychainEntitlement: row["keychain_entitled"], containingApp: row["containing_app"], appIDPrefix: row["app_id_prefix"],
            uikitOnMac: row["uikit_on_mac"])
    }

    /// The keychain as `bundleID` sees it: only its entitled access groups.
    public func keychain(for bundleID: String) throws -> Keychain {
        // A UIKit app on a Mac reaches the data protection keychain alone, as on an iPhone.
        let fileBased = info.profile.hasFileBasedKeychain && (try? app(bundleID))?.uikitOnMac != true ? MacKeychain.fileBasedGroup(of: bundleID) : nil
        let (generation, known) = appCache.withLock { ($0.generation, $0.keychains[bundleID]) }
        if let (scope, hashes) = known { return Keychain(device: self, scope: scope, groupHashes: hashes, fileBasedGroup: fileBased) }
        let keychain = Keychain(device: self, scope: .groups(try app(bundleID).entitledGroups), fileBasedGroup: fileBased)
        appCache.withLock { if $0.generation == generation { $0.keychains[bundleID] = keychain.scopeAndHashes } }
        return keychain
    }

    /// Every item on the device, whatever its group: for listing and export, never for apps.
    public var deviceKeychain: Keychain { Keychain(device: self, scope: .device) }
}

/// What a device remembers of its apps between install and uninstall (see `Device.appCache`).
struct AppCache {
    var generation = 0
    var manifests: [String: AppManifest] = [:]
    /// Each app's keychain scope and its groups' keyed hashes; not the `Keychain`, which would
    /// hold the device from inside it.
    var keychains: [String: (Keychain.Scope, [String: [UInt8]])] = [:]

    mutating func forget() {
        self = AppCache(generation: generation + 1)
    }
}

/// An app's sandbox, or an app group's shared container: UserDefaults (a real property list,
/// plaintext as on iOS; a group's is the suite `UserDefaults(suiteName:)` opens) and files.
/// Reads honour file protection: before first unlock UserDefaults reads back empty, the trap
/// behind iOS 15's pre-warming logouts, and a widget's shared suite is no exception.
public struct Sandbox: Sendable {
    /// The app's bundle ID, or the app group's identifier (`group.…`).
    public let bundleID: String
    let device: Device

    /// UserDefaults' file protection: complete until first user authentication.
    static let defaultsProtection = FileProtection.completeUntilFirstUserAuthentication

    /// Whether this is an app group's shared container rather than an app's sandbox.
    public var isGroupContainer: Bool { AppManifest.isAppGroup(bundleID) }

    private var defaultsURL: URL { isGroupContainer ? device.layout.groupDefaultsFile(bundleID) : device.layout.defaultsFile(bundleID) }

    /// Where a backup records the UserDefaults property list, and where it puts a file: an
    /// app's files are under `Documents/`, a group container's at its root.
    public var defaultsPath: String { "Library/Preferences/\(bundleID).plist" }
    public func archivePath(ofFile name: String) -> String { isGroupContainer ? name : "Documents/\(name)" }

    /// The file a backup's path names, or nil for the UserDefaults property list.
    private func file(atArchivePath path: String) throws -> String? {
        if path == defaultsPath { return nil }
        if isGroupContainer { return path }
        guard path.hasPrefix("Documents/") else {
            throw DeviceError(.invalidArgument, "'\(path)' is not a sandbox path Keyferry restores.")
        }
        return String(path.dropFirst("Documents/".count))
    }

    /// What a message calls it: `com.example.mail`, or `the group container group.example`.
    private var name: String { isGroupContainer ? "the group container \(bundleID)" : bundleID }

    private func available(_ protection: FileProtection) throws -> Bool {
        try device.availableKeys()[protection.keyClass] != nil
    }

    /// Whether UserDefaults can be read in the device's current lock state: before first
    /// unlock they read back empty, which is not the same as having none.
    public var defaultsAreReadable: Bool { (try? available(Self.defaultsProtection)) ?? false }

    /// Every UserDefaults entry; empty (not an error) while the file is protected.
    public func defaults() throws -> [String: Any] {
        guard try available(Self.defaultsProtection) else { return [:] }
        guard let data = FileManager.default.contents(atPath: defaultsURL.path) else { return [:] }
        do {
            return try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any] ?? [:]
        } catch {
            throw DeviceError(.corrupt, "\(defaultsURL.path) is not a property list: \(error.localizedDescription)")
        }
    }

    public func string(forKey key: String) throws -> String? { try defaults()[key] as? String }

    /// Sets one UserDefaults entry (nil removes it). Fails while the file is protected.
    public func set(_ value: Any?, forKey key: String) throws {
        guard try available(Self.defaultsProtection) else {
            throw DeviceError(.protectedDataUnavailable, "UserDefaults of \(name) cannot be written before first unlock.")
        }
        var all = try defaults()
        all[key] = value
        let data: Data
        do {
            data = try PropertyListSerialization.data(fromPropertyList: all, format: .xml, options: 0)
        } catch {
            throw DeviceError(
                .invalidArgument,
                "UserDefaults holds property-list values only (strings, numbers, booleans, dates, data, arrays, dictionaries); '\(key)' is not one.")
        }
        try FileManager.default.createDirectory(at: defaultsURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: defaultsURL, options: .atomic)
    }

    /// Writes a file under Documents with a protection class.
    public func writeFile(_ name: String, _ contents: Data, protection: FileProtection = .completeUntilFirstUserAuthentication) throws {
        let url = try documentURL(name)
        // Class B's new files are sealed to its public key, which stays in memory while locked.
        let created = protection == .completeUnlessOpen && !FileManager.default.fileExists(atPath: url.path)
        guard try created || available(protection) else {
            throw DeviceError(.protectedDataUnavailable, "\(name) is \(protection.rawValue) and cannot be written in the device's current lock state.")
        }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: url, options: .atomic)
        try device.database.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO sandbox_file (bundle_id, path, protection) VALUES (?, ?, ?)",
                arguments: [bundleID, name, protection.rawValue])
        }
    }

    /// Reads a file under Documents; fails while its protection class is unavailable.
    public func readFile(_ name: String) throws -> Data {
        let url = try documentURL(name)
        let recorded = try device.database.unsafeRead { db in
            try String.fetchOne(db, sql: "SELECT protection FROM sandbox_file WHERE bundle_id = ? AND path = ?", arguments: [bundleID, name])
        }
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw DeviceError(.noSuchFile, "\(self.name) has no file \(archivePath(ofFile: name)).")
        }
        // A file no write recorded (put there from outside) gets the strictest class.
        let protection = recorded.flatMap(FileProtection.init(rawValue:)) ?? .complete
        guard try available(protection) else {
            throw DeviceError(.protectedDataUnavailable, "\(name) is \(protection.rawValue) and cannot be read in the device's current lock state.")
        }
        return data
    }

    /// The protection class a write recorded for a file under Documents; nil for none.
    public func protection(ofFile name: String) throws -> FileProtection? {
        _ = try documentURL(name)
        let recorded = try device.database.unsafeRead { db in
            try String.fetchOne(db, sql: "SELECT protection FROM sandbox_file WHERE bundle_id = ? AND path = ?", arguments: [bundleID, name])
        }
        return recorded.flatMap(FileProtection.init(rawValue:))
    }

    /// Removes a file under Documents, whatever the lock state: as on iOS, unlinking needs no
    /// class key. The record goes first, so a crash in between leaves a file no one lists
    /// rather than a listed file that is gone.
    public func removeFile(_ name: String) throws {
        let url = try documentURL(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw DeviceError(.noSuchFile, "\(self.name) has no file \(archivePath(ofFile: name)).")
        }
        try device.database.write { db in
            try db.execute(sql: "DELETE FROM sandbox_file WHERE bundle_id = ? AND path = ?", arguments: [bundleID, name])
        }
        try FileManager.default.removeItem(at: url)
    }

    /// Every file under Documents with its protection class and size, by path. Sizes are
    /// metadata: known whatever the lock state.
    public func files() throws -> [(path: String, protection: FileProtection, bytes: Int)] {
        let rows = try device.database.unsafeRead { db in
            try Row.fetchAll(db, sql: "SELECT path, protection FROM sandbox_file WHERE bundle_id = ? ORDER BY path", arguments: [bundleID])
        }
        return rows.map { row in
            let path: String = row["path"]
            let size = try? FileManager.default.attributesOfItem(atPath: documentURL(path).path)[.size] as? Int
            return (path, FileProtection(rawValue: row["protection"]) ?? .completeUntilFirstUserAuthentication, size ?? 0)
        }
    }

    /// The UserDefaults property list as stored; nil when the app never wrote one, or while it
    /// is protected.
    public func defaultsData() throws -> Data? {
        guard try available(Self.defaultsProtection) else { return nil }
        return FileManager.default.contents(atPath: defaultsURL.path)
    }

    /// Writes a file as a backup recorded it (`defaultsPath`, `archivePath(ofFile:)`).
    public func restoreFile(path: String, contents: Data, protection: FileProtection) throws {
        if let name = try file(atArchivePath: path) {
            try writeFile(name, contents, protection: protection)
        } else {
            try FileManager.default.createDirectory(at: defaultsURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            try contents.write(to: defaultsURL, options: .atomic)
        }
    }

    /// Writes one piece of a file as a backup recorded it, at `offset`: 0 starts the file (what
    /// was there goes), a later piece extends it and must follow the last byte written, so a
    /// restore holds one piece at a time, never a whole file.
    public func restoreFile(path: String, piece: Data, at offset: Int, protection: FileProtection) throws {
        guard offset > 0 else { return try restoreFile(path: path, contents: piece, protection: protection) }
        let url = try file(atArchivePath: path).map(documentURL) ?? defaultsURL
        guard let handle = try? FileHandle(forWritingTo: url) else {
            throw DeviceError(.invalidArgument, "a piece of '\(path)' at offset \(offset) has no start to follow.")
        }
        defer { try? handle.close() }
        let end = try handle.seekToEnd()
        guard end == UInt64(offset) else {
            throw DeviceError(.invalidArgument, "a piece of '\(path)' at offset \(offset) does not follow its \(end) bytes.")
        }
        try handle.write(contentsOf: piece)
    }

    /// Where a file under Documents is. Only the one spelling of a path is accepted (no empty,
    /// `.` or `..` component, no NUL): the protection recorded for `notes/secret.txt` is then
    /// the protection of every way to reach that file (`notes//secret.txt` is refused, not
    /// another name for it).
    private func documentURL(_ name: String) throws -> URL {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.contains("\0"), !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            throw DeviceError(
                .invalidArgument,
                "'\(name)' is not a path inside \(isGroupContainer ? "the group container" : "Documents"); write it as NAME or DIR/NAME, without empty, '.' or '..' components."
            )
        }
        guard !isGroupContainer || !name.hasPrefix("Library/Preferences/") else {
            throw DeviceError(.invalidArgument, "'\(name)': Library/Preferences holds the group's UserDefaults suite; set defaults there instead.")
        }
        return (isGroupContainer ? device.layout.groupContainer(bundleID) : device.layout.documents(bundleID)).appendingPathComponent(name)
    }
}

extension Device {
    /// Where the app's Documents directory is inside a device's directory, whether or not the
    /// device is powered on here.
    public static func documentsDirectory(of directory: URL, app bundleID: String) -> URL {
        DeviceLayout(root: directory).documents(bundleID)
    }

    /// The sandbox of an installed app.
    public func sandbox(for bundleID: String) throws -> Sandbox {
        _ = try app(bundleID)
        return Sandbox(bundleID: bundleID, device: self)
    }

    /// The app's sandbox, or with `group` the app group's container it reaches.
    public func sandbox(for bundleID: String, group: String?) throws -> Sandbox {
        try group.map { try groupContainer($0, for: bundleID) } ?? sandbox(for: bundleID)
    }

    /// The shared container of an app group, as an installed app entitled to it reaches it
    /// (`containerURL(forSecurityApplicationGroupIdentifier:)`, which is nil for any other).
    public func groupContainer(_ group: String, for bundleID: String) throws -> Sandbox {
        let app = try app(bundleID)
        guard app.appGroups.contains(group) else {
            throw DeviceError(
                .invalidArgument,
                "\(bundleID) is not entitled to the app group '\(group)'; its app groups: \(app.appGroups.isEmpty ? "none" : app.appGroups.joined(separator: ", "))."
            )
        }
        return Sandbox(bundleID: group, device: self)
    }

    /// The app groups of the installed apps: the containers on the device.
    public func groupContainers() throws -> [String] {
        Array(Set(try installedApps().flatMap(\.appGroups))).sorted()
    }

    /// A sandbox or group container by its name, for a restore: the apps it belongs to are
    /// installed first.
    public func container(_ name: String) throws -> Sandbox {
        guard AppManifest.isAppGroup(name) else { return try sandbox(for: name) }
        guard try groupContainers().contains(name) else {
            throw DeviceError(.invalidArgument, "no installed app is entitled to the app group '\(name)'.")
        }
        return Sandbox(bundleID: name, device: self)
    }
}
