import AppleFormats
import Backup
import Foundation
import KeychainModel
import KeychainStore

/// Restores an iOS backup folder, a phone's or a Keyferry device's, onto a powered-off device
/// by the rules of `DeviceRestore`: the target keeps its hardware UID and passcode, its
/// non-synchronizable items are replaced and its synchronizable ones merged, and the new store is
/// built beside it and swapped in only when complete. The backup's apps come back with their
/// Documents and UserDefaults, and every keychain item the target may open.
public enum PhoneRestore {
    /// `progress` hears items and files done of their total; it may throw to stop the restore,
    /// which leaves the target as it was.
    public static func restore(
        _ backup: URL, password: Data?, to target: URL, passcode: String?, progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        // Everything that can be refused is refused before the target is touched: the password,
        // Manifest.db, and the keychain, read whole.
        let reader = try PhoneBackupReader(folder: backup)
        let targetKeys = try Device.backupKeys(at: target)
        let sameDevice = reader.wasWritten(by: targetKeys.deviceID)
        let opened = try reader.open(password: password, device: targetKeys)
        let keychain = try opened.keychain()
        let plan = try SandboxPlan(opened)
        return try DeviceRestore.intoCopy(of: target, passcode: passcode) { device in
            try restore(opened, keychain: keychain, plan: plan, sameDevice: sameDevice, into: device, progress: progress)
        }
    }

    private static func restore(
        _ backup: OpenedPhoneBackup, keychain: [OpenedPhoneBackup.KeychainEntry], plan: SandboxPlan, sameDevice: Bool, into device: Device,
        progress: (_ done: Int, _ total: Int) throws -> Void
    ) throws -> RestoreReport {
        var report = RestoreReport(
            sameDevice: sameDevice, mode: backup.manifest.encrypted ? .encrypted : .unencrypted,
            authenticity: backup.manifest.encrypted ? .keychainItems : .unauthenticated, archiveCreated: backup.manifest.date,
            newerBackupOnDevice: device.lastBackupCreated.flatMap { last in
                sameDevice && last > (backup.manifest.date ?? .distantPast) ? last : nil
            })
        report.format = .ios
        report.neverExported = backup.manifest.leftOut
        report.filesNotRestored = plan.notRestored
        let total = keychain.count + plan.files.count
        try progress(0, total)

        // Apps first: their groups tell which items have an app to see them.
        for app in try apps(backup.manifest, keychain: keychain) {
            if (try? device.app(app.bundleID)) != nil { try device.uninstall(bundleID: app.bundleID) }
            try device.install(app)
            report.apps.append(app.bundleID)
        }
        let groups = Set(try device.installedApps().flatMap(\.entitledGroups))

        // The keychain: the target's synchronizable items merge, the rest are replaced.
        let synchronizedOnTarget = try device.deviceKeychain.changes(since: 0).filter(\.record.synchronizable)
            .reduce(into: [:]) { $0[$1.record.primaryKey] = $1 }
        try device.deviceKeychain.deleteNonSynchronizableItems()
        var restored: [ItemRecord] = []
        for entry in keychain {
            switch entry {
            case .item(let record):
                let reason = DeviceRestore.decide(record, onTarget: synchronizedOnTarget[record.primaryKey])
                if reason == nil { restored.append(record) }
                report.items.append(
                    .init(
                        uuid: record.uuid, itemClass: record.itemClass, protection: record.protection, synchronizable: record.synchronizable,
                        accessGroup: record.accessGroup, name: name(record), reason: reason,
                        waitingForApp: reason == nil && !groups.contains(record.accessGroup)))
            case .tombstone:
                continue
            case .sealed(let table, let protection, let why):
                let reason: RestoreReport.Reason =
                    switch why {
                    case .sealedToSourceDevice: sameDevice ? .damaged : .sealedToSourceDevice
                    case .unsupported: .unsupported
                    case .damaged: .damaged
                    }
                report.items.append(
                    .init(
                        uuid: UUID(), itemClass: table, protection: protection ?? .whenUnlockedThisDeviceOnly, synchronizable: false, accessGroup: "",
                        name: nil, reason: reason, waitingForApp: false))
            }
        }
        // Two items of a backup with one primary key: the later write wins, as on a phone.
        var byKey: [PrimaryKey: ItemRecord] = [:]
        for record in restored { byKey[record.primaryKey] = record }
        try device.deviceKeychain.restore(Array(byKey.values))
        try progress(keychain.count, total)

        for (index, file) in plan.files.enumerated() {
            let contents = try backup.contents(of: file.row)
            try device.sandbox(for: file.bundleID).restoreFile(path: file.row.relativePath, contents: contents, protection: file.protection)
            report.sandboxFiles += 1
            try progress(keychain.count + index + 1, total)
        }
        // The last chance to stop, after the costly import: from here the swap goes through.
        try progress(total, total)
        return report
    }

    /// `account @ service` and the like, as Keyferry's own reports name items.
    private static func name(_ record: ItemRecord) -> String? { ArchivedItem.name { record.attributes[$0] } }

    /// The backup's apps as Keyferry installs them. A Keyferry backup names each app's team and
    /// groups; a phone's does not, so the team is read from an item in the app's own group
    /// (`TEAMID.bundleID`), else it is `0000000000`, and the groups are the app's own.
    static func apps(_ manifest: PhoneManifest, keychain: [OpenedPhoneBackup.KeychainEntry]) throws -> [AppManifest] {
        let groups = Set(
            keychain.compactMap { entry -> String? in
                if case .item(let record) = entry { return record.accessGroup }
                return nil
            })
        return try manifest.applications.map { app in
            do {
                try AppManifest.validate(bundleID: app.bundleID)
            } catch {
                throw PhoneBackupError.malformed("its Applications name '\(app.bundleID.prefix(80))', which is not a bundle ID")
            }
            let team =
                app.teamID
                ?? groups.lazy.compactMap { group -> String? in
                    let parts = group.split(separator: ".", maxSplits: 1)
                    guard parts.count == 2, parts[1] == app.bundleID, (try? AppManifest.validate(teamID: String(parts[0]))) != nil else { return nil }
                    return String(parts[0])
                }.first ?? "0000000000"
            let manifest = AppManifest(
                bundleID: app.bundleID, teamID: team, accessGroups: app.accessGroups, hasKeychainEntitlement: app.hasKeychainEntitlement)
            do {
                try manifest.validate()
            } catch {
                throw PhoneBackupError.malformed("its app \(app.bundleID): \(error)")
            }
            return manifest
        }
    }
}

/// Which files of a backup a restore writes: each installed app's UserDefaults and Documents,
/// by paths checked before anything is touched.
struct SandboxPlan {
    struct File {
        var bundleID: String
        var row: ManifestRow
        var protection: FileProtection
    }

    var files: [File] = []
    /// Regular files not restored, by domain (or by why, for an app's files outside Documents).
    var notRestored: [String: Int] = [:]

    init(_ backup: OpenedPhoneBackup) throws {
        let apps = Set(backup.manifest.applications.map(\.bundleID))
        for row in backup.rows where row.flags == ManifestRow.regularFile {
            guard row.domain.hasPrefix(PhoneDomain.appPrefix), case let bundleID = String(row.domain.dropFirst(PhoneDomain.appPrefix.count)),
                apps.contains(bundleID)
            else {
                if row.domain != PhoneDomain.keychain { notRestored[row.domain, default: 0] += 1 }
                continue
            }
            let path = row.relativePath
            guard path == PhoneDomain.defaults(bundleID) || path.hasPrefix("Documents/") else {
                notRestored["\(row.domain) outside Documents and UserDefaults", default: 0] += 1
                continue
            }
            try Self.check(path, in: row.domain)
            files.append(File(bundleID: bundleID, row: row, protection: PhoneClass.fileProtection(row.file.protectionClass)))
        }
    }

    /// A path is written inside the app's sandbox only: no absolute path, no empty, `.` or `..`
    /// component, no NUL. Refused as malformed, so nothing is touched.
    static func check(_ path: String, in domain: String) throws {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.hasPrefix("/"), !path.contains("\0"), !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            throw PhoneBackupError.malformed("\(domain) holds a file at '\(path.prefix(200))', which escapes the app's sandbox")
        }
    }
}
