import Foundation
import GRDB
import KeychainModel

extension Device {
    /// Installs an app, or updates an installed one (an update keeps the sandbox). Installing
    /// under another team ID is an app transfer: the app's new groups do not include the old
    /// ones, so items there become unreachable, as on iOS.
    public func install(_ app: AppManifest) throws {
        try app.validate()
        let files = FileManager.default
        let installed = try database.unsafeRead { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM app WHERE bundle_id = ?", arguments: [app.bundleID]) ?? false
        }
        if !installed {
            // A fresh install starts empty, even if an uninstall was cut short before its files went.
            try? files.removeItem(at: layout.sandbox(app.bundleID))
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
                    INSERT INTO app (bundle_id, team_id, access_groups, keychain_entitled, installed_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (bundle_id) DO UPDATE SET team_id = excluded.team_id,
                        access_groups = excluded.access_groups, keychain_entitled = excluded.keychain_entitled
                    """,
                arguments: [app.bundleID, app.teamID, groups, app.hasKeychainEntitlement, clock.now().timeIntervalSinceReferenceDate])
        }
    }

    /// Uninstalls an app: its sandbox (UserDefaults, Documents) is wiped; its keychain items stay,
    /// as on iOS, and a reinstall finds them. The registry goes first: if the files outlive a
    /// crash here, the next install removes them.
    public func uninstall(bundleID: String) throws {
        _ = try app(bundleID)
        defer { appCache.withLock { $0.forget() } }
        try database.write { db in
            try db.execute(sql: "DELETE FROM app WHERE bundle_id = ?", arguments: [bundleID])
            try db.execute(sql: "DELETE FROM sandbox_file WHERE bundle_id = ?", arguments: [bundleID])
        }
        try? FileManager.default.removeItem(at: layout.sandbox(bundleID))
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
            throw DeviceError(.appNotInstalled, "\(bundleID) is not installed on \(info.name); install it first (keyferry app install).")
        }
        let manifest = try Self.manifest(row)
        appCache.withLock { if $0.generation == generation { $0.manifests[bundleID] = manifest } }
        return manifest
    }

    private static func manifest(_ row: Row) throws -> AppManifest {
        let groups = try JSONDecoder().decode([String].self, from: Data((row["access_groups"] as String).utf8))
        return AppManifest(
            bundleID: row["bundle_id"], teamID: row["team_id"], accessGroups: groups,
            hasKeychainEntitlement: row["keychain_entitled"])
    }

    /// The keychain as `bundleID` sees it: only its entitled access groups.
    public func keychain(for bundleID: String) throws -> Keychain {
        let fileBased = info.profile.hasFileBasedKeychain ? MacKeychain.fileBasedGroup(of: bundleID) : nil
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

/// An app's sandbox: its UserDefaults (a real property list, plaintext as on iOS) and its files.
/// Reads honour file protection: before first unlock UserDefaults reads back empty, the trap
/// behind iOS 15's pre-warming logouts.
public struct Sandbox: Sendable {
    public let bundleID: String
    let device: Device

    /// UserDefaults' file protection: complete until first user authentication.
    static let defaultsProtection = FileProtection.completeUntilFirstUserAuthentication

    private var defaultsURL: URL { device.layout.defaultsFile(bundleID) }

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
            throw DeviceError(.protectedDataUnavailable, "UserDefaults of \(bundleID) cannot be written before first unlock.")
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
        try data.write(to: defaultsURL, options: .atomic)
    }

    /// Writes a file under Documents with a protection class.
    public func writeFile(_ name: String, _ contents: Data, protection: FileProtection = .completeUntilFirstUserAuthentication) throws {
        let url = try documentURL(name)
        guard try available(protection) else {
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
            throw DeviceError(.noSuchFile, "\(bundleID) has no file Documents/\(name).")
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
            throw DeviceError(.noSuchFile, "\(bundleID) has no file Documents/\(name).")
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

    /// Writes a file as a backup recorded it: `Library/Preferences/BUNDLE.plist` (UserDefaults)
    /// or `Documents/NAME`.
    public func restoreFile(path: String, contents: Data, protection: FileProtection) throws {
        if path == "Library/Preferences/\(bundleID).plist" {
            try contents.write(to: defaultsURL, options: .atomic)
        } else if path.hasPrefix("Documents/") {
            try writeFile(String(path.dropFirst("Documents/".count)), contents, protection: protection)
        } else {
            throw DeviceError(.invalidArgument, "'\(path)' is not a sandbox path Keyferry restores.")
        }
    }

    /// Writes one piece of a file as a backup recorded it, at `offset`: 0 starts the file (what
    /// was there goes), a later piece extends it and must follow the last byte written, so a
    /// restore holds one piece at a time, never a whole file.
    public func restoreFile(path: String, piece: Data, at offset: Int, protection: FileProtection) throws {
        guard offset > 0 else { return try restoreFile(path: path, contents: piece, protection: protection) }
        let url =
            path == "Library/Preferences/\(bundleID).plist"
            ? defaultsURL
            : path.hasPrefix("Documents/") ? try documentURL(String(path.dropFirst("Documents/".count))) : nil
        guard let url, let handle = try? FileHandle(forWritingTo: url) else {
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
                "'\(name)' is not a path inside Documents; write it as NAME or DIR/NAME, without empty, '.' or '..' components.")
        }
        return device.layout.documents(bundleID).appendingPathComponent(name)
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
}
