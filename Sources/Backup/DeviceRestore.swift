package import Foundation
package import KeychainModel
package import KeychainStore
import KeyferryCrypto
package import KeyferryThreads

/// Restores an archive onto a powered-off device, the same one or a new one, as iOS does: the
/// target keeps its hardware UID and passcode; items come back only where their wrapping
/// opens; the target's non-synchronizable items are replaced and its synchronizable ones merged.
/// The keychain import checks no app: an item whose app is not installed comes back, and is
/// seen once an app entitled to its group is installed.
/// The new store is built beside the target and swapped in only when complete.
package enum DeviceRestore {
    /// `passcode` is the target's own (its class keys are needed to store the items).
    /// `progress` hears each item and file as it is done, and once more just before the swap;
    /// it may throw to stop the restore (an interruption): the target is left as it was and
    /// the copy being built is removed. `acceptingUnauthenticated` lets an unencrypted archive
    /// that nothing authenticates through (see `requireAuthenticatable`): for a caller that
    /// wrote the archive itself, or a user who knows where it comes from.
    package static func restore(
        _ archive: URL, password: Data?, to target: URL, passcode: String?, acceptingUnauthenticated: Bool = false,
        progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        // Everything that can be refused is refused before anything of the target changes.
        let reader = try ArchiveReader(contentsOf: archive)
        // Reading the target's backup keys also requires it to be a device.
        let targetKeys = try Device.backupKeys(at: target)
        if !acceptingUnauthenticated { try requireAuthenticatable(reader, target: targetKeys) }
        // The archive's key and the target's passcode key are each an Argon2id: derived side
        // by side.
        let keys = BackgroundWork { try reader.sectionKeys(password: password, device: targetKeys) }
        return try intoCopy(of: target, passcode: passcode, after: keys) { device, keys in
            try restore(reader, keys: keys, into: device, progress: progress)
        }
    }

    /// Runs `restore` on an unlocked copy of the device in `target`, built beside it, and swaps
    /// the copy in once `restore` returns; whatever it throws leaves the target as it was and
    /// the copy removed. `passcode` is the target's own. The target is held throughout, so no
    /// node starts on it meanwhile, and one that runs makes the restore fail with `inUse`.
    ///
    /// `opening` is the backup's own opening (its password's key), run meanwhile: the
    /// passcode's verdict (an attempt counted, or the count cleared) waits for it, so a wrong
    /// password leaves the target as it was and counts no attempt; and whatever else stops the
    /// restore, the opening is waited out and its refusal comes first. `restore` gets what it
    /// opened.
    package static func intoCopy<Opened: Sendable>(
        of target: URL, passcode: String?, after opening: BackgroundWork<Opened>, _ restore: (Device, Opened) throws -> RestoreReport
    ) throws -> RestoreReport {
        do {
            return try intoCopy(of: target, passcode: passcode, beforeVerdict: { _ = try opening.result() }) { device in
                try restore(device, try opening.result())
            }
        } catch {
            _ = try opening.result()
            throw error
        }
    }

    private static func intoCopy(
        of target: URL, passcode: String?, beforeVerdict: () throws -> Void, _ restore: (Device) throws -> RestoreReport
    ) throws -> RestoreReport {
        let hold = try DeviceHold.take(target)
        defer { hold.release() }
        let staging = Device.stagingDirectory(for: target)
        var swapped = false
        defer { if !swapped { try? FileManager.default.removeItem(at: staging) } }
        let device = try Device.unlockedCopy(
            of: hold, at: staging, passcode: passcode, beforeVerdict: beforeVerdict,
            missingPasscode: "\(target.path) has a passcode; give it to restore onto it.")
        defer { device.powerOff() }
        let report = try restore(device)
        device.powerOff()
        try Device.replace(at: target, with: staging)
        swapped = true
        return report
    }

    /// Restores straight into a powered-on, unlocked device, with no copy aside: for scratch
    /// devices (a fork, a new device made to try a path) that a failure part-way costs nothing.
    package static func restore(
        _ archive: URL, password: Data?, into device: Device, acceptingUnauthenticated: Bool = false,
        progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        let reader = try ArchiveReader(contentsOf: archive)
        if !acceptingUnauthenticated { try requireAuthenticatable(reader, target: device.backupKeys) }
        return try restore(reader, keys: try reader.sectionKeys(password: password, device: device.backupKeys), into: device, progress: progress)
    }

    /// Refuses what nothing authenticates. A format 2 unencrypted archive of the target itself
    /// is authenticated by the target's own key, so a forgery fails; any other unencrypted
    /// archive (format 1, or another device's) carries nothing but checksums, which anyone can
    /// write, so its apps, entitlements, defaults and files could be anyone's, and it would
    /// replace the target's local items. Those pass only when the caller vouches for them.
    static func requireAuthenticatable(_ reader: ArchiveReader, target: DeviceBackupKeys) throws {
        guard reader.authenticity(device: target) == .checksums else { return }
        // The command line adds how to restore it anyway (`Remedy`).
        throw ArchiveError.unauthenticated(
            reader.header.deviceID == target.deviceID
                ? "it is an unencrypted archive in format \(reader.version), which claims to come from this device but carries nothing only this "
                    + "device could write (format \(ArchiveFormat.version) is authenticated)"
                : "it is an unencrypted archive of another device, and nothing in one proves who wrote it: anyone could have written its apps, "
                    + "entitlements, defaults and files (an encrypted backup is authenticated)")
    }

    private static func restore(
        _ reader: ArchiveReader, keys: SectionKeys, into device: Device, progress: (_ done: Int, _ total: Int) throws -> Void
    ) throws -> RestoreReport {
        // What the manifest says is there, read first and unopened: for progress only.
        let expected = (try? reader.unverifiedManifest()).map(Importer.expectedWork) ?? 0
        var importer = try Importer(
            device: device, keys: keys,
            report: RestoreReport(
                sameDevice: reader.header.deviceID == device.info.id, mode: reader.header.mode,
                authenticity: reader.authenticity(device: device.backupKeys), archiveCreated: reader.header.created,
                newerBackupOnDevice: device.lastBackupCreated.flatMap { last in
                    reader.header.deviceID == device.info.id && last > reader.header.created ? last : nil
                }))
        try progress(0, expected)
        // Whatever stops the restore, no section is still being opened when it returns.
        defer { importer.abandon() }
        // Every section lands in a store being rebuilt: its unique indexes are built once, at the end.
        let manifest = try device.deviceKeychain.loadingInBulk { load in
            let manifest = try reader.read(keys: keys) { kind, data in
                try importer.add(kind, data, into: load)
                try progress(importer.done, max(expected, importer.done))
            }
            try importer.finish(into: load)
            return manifest
        }
        var report = importer.report
        report.neverExported = manifest.counts.filter { $0.key.hasPrefix("notExported.") }
            .reduce(into: [:]) { $0[String($1.key.dropFirst("notExported.".count))] = $1.value }
        // The last chance to stop, after the costly import: from here the swap goes through.
        try progress(importer.done, importer.done)
        return report
    }

    /// The target's items a restore replaces: live, non-synchronizable, not the device's own.
    package static func replacedLocally(_ items: [ItemChange]) -> [ItemRecord] {
        items.filter { !$0.isTombstone && !$0.record.synchronizable && $0.record.accessGroup != Device.ownAccessGroup }.map(\.record)
    }

    /// What the target's own items lost to a restore that wrote `restored` (when each restored
    /// item under their primary keys was last modified): those it has no copy of, and those it
    /// brought back older.
    package static func lost(_ local: [ItemRecord], restored: [PrimaryKey: Date]) -> [RestoreReport.LocalItemLost] {
        local.compactMap { item in
            let archived = restored[item.primaryKey]
            guard archived.map({ item.modificationDate > $0 }) ?? true else { return nil }
            return .init(
                name: ArchivedItem.name { item.attributes[$0] }, itemClass: item.itemClass, accessGroup: item.accessGroup,
                reason: archived == nil ? .notInArchive : .olderInArchive)
        }
    }

    /// Why an item that opened does not come back, or nil when it does.
    package static func decide(_ record: ItemRecord, onTarget: ItemChange?) -> RestoreReport.Reason? {
        if Device.isReservedAccessGroup(record.accessGroup) { return .reservedGroup }
        guard let onTarget else { return nil }
        if onTarget.isTombstone, let deleted = onTarget.tombstoneDate, deleted > record.modificationDate { return .newerTombstone }
        if !onTarget.isTombstone, onTarget.record.modificationDate > record.modificationDate { return .newerOnDevice }
        return nil
    }

    /// Takes an archive's sections as they are read: apps first (their groups decide which
    /// items have a home), then each keychain section opened and sealed for the device on every
    /// core while the one before it is written, and each piece of a sandbox file appended where
    /// it belongs. A crafted archive costs a restore no more memory than two sections.
    private struct Importer {
        let device: Device
        let keys: SectionKeys
        var report: RestoreReport
        /// Items and files done, for progress.
        private(set) var done = 0
        /// The target's synchronizable items, as they were before the restore, by primary key.
        private let synchronizedOnTarget: [PrimaryKey: ItemChange]
        /// The target's own items that a restore replaces (non-synchronizable, live): what it
        /// loses is reported.
        private let localOnTarget: [ItemRecord]
        /// When each restored item under the primary key of one of `localOnTarget` was last
        /// modified: kept for those keys only, so the archive's size does not add to memory.
        private var restoredVersions: [PrimaryKey: Date] = [:]
        private var entitledGroups: Set<String>?
        /// The file whose pieces are arriving, and how many bytes of it are written.
        private var currentFile: (id: String, bytes: Int)?
        /// The keychain section being opened and sealed while the one before it is written.
        private var opening: BackgroundWork<OpenedSection>?

        /// A keychain section once opened: what happens to each item, and the rows to write.
        private struct OpenedSection: Sendable {
            var outcomes: [RestoreReport.ItemOutcome]
            var versions: [PrimaryKey: Date]
            var rows: Keychain.RestoreRows
        }

        init(device: Device, keys: SectionKeys, report: RestoreReport) throws {
            self.device = device
            self.keys = keys
            self.report = report
            let before = try device.deviceKeychain.changes(since: 0)
            synchronizedOnTarget = before.filter(\.record.synchronizable).reduce(into: [:]) { $0[$1.record.primaryKey] = $1 }
            localOnTarget = DeviceRestore.replacedLocally(before)
            try device.deviceKeychain.deleteNonSynchronizableItems()
        }

        /// Items and files the manifest counts.
        static func expectedWork(_ manifest: ArchiveManifest) -> Int {
            manifest.counts.filter { $0.key.hasPrefix("items.") }.values.reduce(0, +) + (manifest.counts["sandboxFiles"] ?? 0)
        }

        /// `load` keeps the rows unique while the store's unique indexes are set aside.
        mutating func add(_ kind: SectionKind, _ data: Data, into load: BulkLoad) throws {
            switch kind {
            case .apps:
                guard entitledGroups == nil else { throw ArchiveError.inconsistent("its apps come after its items or files") }
                for app in try JSONDecoder().decode([AppManifest].self, from: data) {
                    try device.installFresh(app)
                    report.apps.append(app.bundleID)
                }
            case .keychain:
                let previous = opening
                opening = startOpening(data, groups: try groupsWithAnApp())
                if let previous { try write(try previous.result(), into: load) }
            case .sandbox:
                for entry in try Self.decoded(data, kind, { try SandboxEntry(decoding: $0) }) { try restore(entry) }
            case .manifest:
                break
            }
        }

        /// Writes the last keychain section, once every section is read, and reports what the
        /// target's own items lost to it.
        mutating func finish(into load: BulkLoad) throws {
            if let last = opening {
                opening = nil
                try write(try last.result(), into: load)
            }
            report.localItemsLost += DeviceRestore.lost(localOnTarget, restored: restoredVersions)
            // One item twice in a backup: the later took the earlier's place, as on a phone.
            report.items.replace(load.displaced, with: .replacedInBackup)
        }

        /// Waits out a section still being opened, on the way out of a restore that stopped.
        mutating func abandon() {
            _ = try? opening?.result()
            opening = nil
        }

        /// Decodes, opens and seals a keychain section on other threads. Opening is the costly
        /// part, so it runs on every core.
        private func startOpening(_ data: Data, groups: Set<String>) -> BackgroundWork<OpenedSection> {
            let keybag = keys.backupKeybag
            let deviceKey = device.backupKeys.items
            let binding = keys.items
            let sameDevice = report.sameDevice
            let onTarget = synchronizedOnTarget
            let localKeys = Set(localOnTarget.map(\.primaryKey))
            let keychain = device.deviceKeychain
            return BackgroundWork {
                // Older archives carry the device's own items; a device keeps its own instead.
                let items = try Self.decoded(data, .keychain) { try ArchivedItem(decoding: $0) }.filter { $0.accessGroup != Device.ownAccessGroup }
                let opened = try ParallelMap.map(items) { item -> Keychain.RestoredItem? in
                    let key = item.wrapping == .backup ? keybag?.key(for: item.protection) : deviceKey
                    return key.flatMap { try? item.open(with: $0, binding: binding) }
                }
                var outcomes: [RestoreReport.ItemOutcome] = []
                outcomes.reserveCapacity(items.count)
                var restored: [Keychain.RestoredItem] = []
                var versions: [PrimaryKey: Date] = [:]
                for (item, restoredItem) in zip(items, opened) {
                    let reason: RestoreReport.Reason?
                    var name = item.name
                    var waitsForApp = false
                    if let restoredItem {
                        let record = restoredItem.record
                        name = name ?? ArchivedItem.name { record.attributes[$0] }
                        let primaryKey = record.primaryKey
                        reason = DeviceRestore.decide(record, onTarget: onTarget[primaryKey])
                        if reason == nil {
                            restored.append(restoredItem)
                            if localKeys.contains(primaryKey) { versions[primaryKey] = record.modificationDate }
                        }
                        waitsForApp = reason == nil && !groups.contains(record.accessGroup)
                    } else {
                        // Sealed with the password's keys and still shut: altered. Sealed with a
                        // device's key: altered on that device, else bound to it.
                        reason =
                            item.wrapping == .backup || sameDevice
                            ? .damaged
                            : item.protection.isThisDeviceOnly
                                ? .deviceBound
                                : .unencryptedOnAnotherDevice
                    }
                    outcomes.append(.init(item, name: name, reason: reason, waitingForApp: waitsForApp))
                }
                return OpenedSection(outcomes: outcomes, versions: versions, rows: try keychain.sealedForRestore(restored))
            }
        }

        private mutating func write(_ section: OpenedSection, into load: BulkLoad) throws {
            guard report.items.count + section.outcomes.count <= ArchiveFormat.maximumItems else {
                throw ArchiveError.inconsistent("it holds more than \(ArchiveFormat.maximumItems) keychain items")
            }
            let unreadable = Set(try device.deviceKeychain.restore(section.rows, in: load).map(\.uuid))
            report.items += unreadable.isEmpty ? section.outcomes : section.outcomes.map { $0.checked(against: unreadable) }
            restoredVersions.merge(section.versions) { $1 }
            done += section.outcomes.count
        }

        /// One piece of a file: the first starts it, each next must follow the last.
        private mutating func restore(_ entry: SandboxEntry) throws {
            _ = try groupsWithAnApp()
            let id = "\(entry.bundleID)/\(entry.path)"
            if entry.offset == 0 {
                currentFile = (id, 0)
                report.sandboxFiles += 1
                done += 1
            } else if currentFile?.id != id || currentFile?.bytes != entry.offset {
                throw ArchiveError.inconsistent("a piece of \(id) at offset \(entry.offset) arrives out of order")
            }
            try device.container(entry.bundleID).restoreFile(
                path: entry.path, piece: entry.contents, at: entry.offset,
                protection: FileProtection(rawValue: entry.protection) ?? .completeUntilFirstUserAuthentication)
            currentFile?.bytes += entry.contents.count
        }

        /// The groups the installed apps are entitled to, once the apps are in.
        private mutating func groupsWithAnApp() throws -> Set<String> {
            if let entitledGroups { return entitledGroups }
            let groups = Set(try device.installedApps().flatMap(\.entitledGroups))
            entitledGroups = groups
            return groups
        }

        /// The entries of an authenticated section; one that does not decode was written wrong.
        private static func decoded<Entry>(_ data: Data, _ kind: SectionKind, _ entry: (ArraySlice<UInt8>) throws -> Entry) throws -> [Entry] {
            do {
                return try EntryList.decode(data).map(entry)
            } catch {
                throw ArchiveError.inconsistent("a \(kind) section does not decode")
            }
        }
    }
}

extension RestoreReport.ItemOutcome {
    init(_ item: ArchivedItem, name: String?, reason: RestoreReport.Reason?, waitingForApp: Bool) {
        self.init(
            uuid: item.uuid, itemClass: item.itemClass, protection: item.protection, synchronizable: item.synchronizable,
            accessGroup: item.accessGroup, name: name, reason: reason, waitingForApp: waitingForApp)
    }
}
