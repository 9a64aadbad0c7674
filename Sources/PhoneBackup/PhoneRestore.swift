import AppleFormats
import Backup
package import Foundation
package import KeychainModel
import KeychainStore
import KeyferryThreads

/// Restores an iOS backup folder, a phone's or a Keyferry device's, onto a powered-off device
/// by the rules of `DeviceRestore`: the target keeps its hardware UID and passcode, its
/// non-synchronizable items are replaced and its synchronizable ones merged, and the new store is
/// built beside it and swapped in only when complete. The backup's apps come back with their
/// Documents and UserDefaults, and every keychain item the target may open.
package enum PhoneRestore {
    /// `progress` hears items and files done of their total; it may throw to stop the restore,
    /// which leaves the target as it was; so may `checkpoint`, called while `Manifest.db` is
    /// read. An unencrypted backup, which nothing authenticates (anyone can write one, claiming
    /// any device), is refused unless `acceptingUnauthenticated`.
    package static func restore(
        _ backup: URL, password: Data?, to target: URL, passcode: String?, acceptingUnauthenticated: Bool = false,
        checkpoint: @escaping @Sendable () throws -> Void = {}, progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        // What can be refused is refused before anything of the target changes: the password,
        // Manifest.db, every path to be written.
        let reader = try PhoneBackupReader(folder: backup)
        let targetKeys = try Device.backupKeys(at: target)
        let sameDevice = reader.wasWritten(by: targetKeys.deviceID)
        if !reader.isEncrypted, !acceptingUnauthenticated { throw PhoneBackupError.unauthenticated(sameDevice: sameDevice) }
        // The backup is opened (the password's key, Manifest.db) while the target's passcode is
        // stretched (`DeviceRestore.intoCopy` has the verdict wait for it); the keychain is then
        // read and opened while the target is copied, and a keychain that does not read stops
        // the restore in the copy, which is removed.
        let opening = BackgroundWork { () throws -> Opening in
            let opened = try reader.open(password: password, device: targetKeys, checkpoint: checkpoint)
            return Opening(opened: opened, plan: try SandboxPlan(opened), keychain: BackgroundWork { try opened.keychain() })
        }
        do {
            return try DeviceRestore.intoCopy(of: target, passcode: passcode, after: opening) { device, open in
                try restore(open.opened, keychain: try open.keychain.result(), plan: open.plan, sameDevice: sameDevice, into: device, progress: progress)
            }
        } catch {
            // A keychain still being read is waited out.
            if let open = try? opening.result() { _ = try? open.keychain.result() }
            throw error
        }
    }

    /// A backup opened, its files planned, and its keychain being read.
    private struct Opening: Sendable {
        let opened: OpenedPhoneBackup
        let plan: SandboxPlan
        let keychain: BackgroundWork<[OpenedPhoneBackup.KeychainEntry]>
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
            try device.installFresh(app)
            report.apps.append(app.bundleID)
        }
        let groups = Set(try device.installedApps().flatMap(\.entitledGroups))

        // The keychain: the target's synchronizable items merge, the rest are replaced.
        let before = try device.deviceKeychain.changes(since: 0)
        let synchronizedOnTarget = before.filter(\.record.synchronizable).reduce(into: [:]) { $0[$1.record.primaryKey] = $1 }
        let localOnTarget = DeviceRestore.replacedLocally(before)
        try device.deviceKeychain.deleteNonSynchronizableItems()
        // Outcomes are collected here and reported once the store has read every item back.
        var outcomes: [RestoreReport.ItemOutcome] = []
        var restored: [(record: ItemRecord, outcome: Int)] = []
        for entry in keychain {
            switch entry {
            case .item(let record):
                let reason = DeviceRestore.decide(record, onTarget: synchronizedOnTarget[record.primaryKey])
                if reason == nil { restored.append((record, outcomes.count)) }
                outcomes.append(
                    .init(
                        uuid: record.uuid, itemClass: record.itemClass, protection: record.protection, synchronizable: record.synchronizable,
                        accessGroup: record.accessGroup, name: name(record), reason: reason,
                        waitingForApp: reason == nil && !groups.contains(record.accessGroup)))
            case .neverBackedUp(let record, _):
                outcomes.append(
                    .init(
                        uuid: record.uuid, itemClass: record.itemClass, protection: record.protection, synchronizable: record.synchronizable,
                        accessGroup: record.accessGroup, name: name(record), reason: .neverBackedUp, waitingForApp: false))
            case .tombstone:
                continue
            case .sealed(let uuid, let table, let protection, let why):
                let reason: RestoreReport.Reason =
                    switch why {
                    case .sealedToSourceDevice: sameDevice ? .damaged : .sealedToSourceDevice
                    case .unsupported: .unsupported
                    case .damaged: .damaged
                    }
                outcomes.append(
                    .init(
                        uuid: uuid, itemClass: table, protection: protection ?? .whenUnlockedThisDeviceOnly, synchronizable: false, accessGroup: "",
                        name: nil, reason: reason, waitingForApp: false))
            }
        }
        // Two items of a backup with one primary key, or one UUID: the later write wins, as on a
        // phone, and the earlier is reported replaced rather than restored.
        var kept = Array(repeating: true, count: restored.count)
        var keys = Set<PrimaryKey>()
        var uuids = Set<UUID>()
        for index in restored.indices.reversed() {
            let record = restored[index].record
            guard keys.insert(record.primaryKey).inserted, uuids.insert(record.uuid).inserted else {
                kept[index] = false
                outcomes[restored[index].outcome].replace(with: .replacedInBackup)
                continue
            }
        }
        let unique = restored.indices.filter { kept[$0] }.map { restored[$0].record }
        let localKeys = Set(localOnTarget.map(\.primaryKey))
        report.localItemsLost = DeviceRestore.lost(
            localOnTarget,
            restored: unique.filter { localKeys.contains($0.primaryKey) }.reduce(into: [:]) { $0[$1.primaryKey] = $1.modificationDate })

        // The items are sealed for the store on other threads while the files are written.
        let store = device.deviceKeychain
        let sealing = BackgroundWork { try store.sealedForRestore(unique) }
        do {
            var done = 0
            var sandboxes: [String: Sandbox] = [:]
            let containers = Set(try device.groupContainers())
            for group in plan.groups {
                // A group container no restored app is entitled to has nowhere to go: counted, not written.
                func hasPlace(_ file: SandboxPlan.File) -> Bool { !AppManifest.isAppGroup(file.bundleID) || containers.contains(file.bundleID) }
                for file in group where !hasPlace(file) {
                    report.filesNotRestored["\(file.row.domain) (no restored app is entitled to the group)", default: 0] += 1
                }
                let placed = group.filter(hasPlace)
                let contents = try ParallelMap.map(placed) { try backup.contents(of: $0.row) }
                for (file, contents) in zip(placed, contents) {
                    let sandbox = try sandboxes[file.bundleID] ?? device.container(file.bundleID)
                    sandboxes[file.bundleID] = sandbox
                    try sandbox.restoreFile(path: file.row.relativePath, contents: contents, protection: file.protection)
                }
                report.sandboxFiles += placed.count
                done += group.count
                try progress(done, total)
            }
        } catch {
            // Whatever stops the restore, no item is still being sealed when it returns.
            _ = try? sealing.result()
            throw error
        }
        // Into a store being rebuilt: its unique indexes are built once, after the rows.
        let rows = try sealing.result()
        let unreadable = Set(try store.loadingInBulk { load in try store.restore(rows, in: load) }.map(\.uuid))
        report.items += unreadable.isEmpty ? outcomes : outcomes.map { $0.checked(against: unreadable) }
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
struct SandboxPlan: Sendable {
    struct File {
        var bundleID: String
        var row: ManifestRow
        var protection: FileProtection
        /// The blob's size on disk: what reading it costs, whatever its record says.
        var blobBytes: Int
    }

    var files: [File] = []
    /// Regular files not restored, by domain (or by why, for an app's files outside Documents).
    var notRestored: [String: Int] = [:]
    /// Where `notRestored` counts the rows whose record does not decode, whatever their domain.
    static let unreadableRecords = "rows of Manifest.db whose record does not decode"

    /// The files in groups of at most eight and 64 MiB of blobs (a larger file alone): what a
    /// restore holds in memory while a group is decrypted on every core.
    var groups: [[File]] {
        var groups: [[File]] = []
        var bytes = 0
        for file in files {
            let size = file.blobBytes
            if let last = groups.last, last.count < 8, bytes + size <= 64 << 20 {
                groups[groups.count - 1].append(file)
                bytes += size
            } else {
                groups.append([file])
                bytes = size
            }
        }
        return groups
    }

    init(_ backup: OpenedPhoneBackup) throws {
        if !backup.unreadableRecords.isEmpty { notRestored[Self.unreadableRecords] = backup.unreadableRecords.count }
        let apps = Set(backup.manifest.applications.map(\.bundleID))
        for row in backup.rows where row.flags == ManifestRow.regularFile {
            guard let owner = owner(of: row, apps: apps) else { continue }
            try Self.check(row.relativePath, in: row.domain)
            let blob = try backup.folder.blob(row.fileID)
            let blobBytes = (try? FileManager.default.attributesOfItem(atPath: blob.path)[.size] as? Int) ?? 0
            files.append(File(bundleID: owner, row: row, protection: PhoneClass.fileProtection(row.file.protectionClass), blobBytes: blobBytes))
        }
    }

    /// The sandbox or group container a file of the backup goes to: an app's UserDefaults and
    /// Documents, or any path of an app group's container (placed once an app entitled to it is
    /// installed). Nil, counted in `notRestored`, for anything else.
    private mutating func owner(of row: ManifestRow, apps: Set<String>) -> String? {
        if row.domain.hasPrefix(PhoneDomain.groupPrefix), case let group = String(row.domain.dropFirst(PhoneDomain.groupPrefix.count)),
            AppManifest.isAppGroup(group)
        {
            return group
        }
        guard row.domain.hasPrefix(PhoneDomain.appPrefix), case let bundleID = String(row.domain.dropFirst(PhoneDomain.appPrefix.count)),
            apps.contains(bundleID)
        else {
            if row.domain != PhoneDomain.keychain { notRestored[row.domain, default: 0] += 1 }
            return nil
        }
        guard row.relativePath == PhoneDomain.defaults(bundleID) || row.relativePath.hasPrefix("Documents/") else {
            notRestored["\(row.domain) outside Documents and UserDefaults", default: 0] += 1
            return nil
        }
        return bundleID
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
