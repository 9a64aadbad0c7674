import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferryThreads

/// Restores an archive onto a powered-off device, the same one or a new one, as iOS does: the
/// target keeps its hardware UID and passcode; items come back only where their wrapping
/// opens; the target's non-synchronizable items are replaced and its synchronizable ones merged.
/// The keychain import checks no app: an item whose app is not installed comes back, and is
/// seen once an app entitled to its group is installed.
/// The new store is built beside the target and swapped in only when complete.
public enum DeviceRestore {
    /// `passcode` is the target's own (its class keys are needed to store the items).
    /// `progress` hears each item and file as it is done, and once more just before the swap;
    /// it may throw to stop the restore (an interruption): the target is left as it was and
    /// the copy being built is removed.
    public static func restore(
        _ archive: URL, password: Data?, to target: URL, passcode: String?,
        progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        // Everything that can be refused is refused before the target is touched.
        let reader = try ArchiveReader(contentsOf: archive)
        // Reading the target's backup keys also requires it to be a device.
        let keys = try reader.sectionKeys(password: password, device: try Device.backupKeys(at: target))
        Device.removeAbandonedStaging(for: target)
        try checkPasscode(passcode, of: target)

        let staging = Device.stagingDirectory(for: target)
        var swapped = false
        defer { if !swapped { try? FileManager.default.removeItem(at: staging) } }
        do {
            try FileManager.default.copyItem(at: target, to: staging)
        } catch {
            throw DeviceError(.io, "cannot copy \(target.path) aside to build the restore: \(error.localizedDescription)")
        }
        let device = try Device.powerOn(at: staging)
        defer { device.powerOff() }
        // The passcode was checked on the target: the copy has the same.
        try device.unlock(passcode: passcode)
        let report = try restore(reader, keys: keys, into: device, progress: progress)
        device.powerOff()
        try Device.replace(at: target, with: staging)
        swapped = true
        return report
    }

    /// Checks the passcode on the target itself, before its copy is made: a wrong one counts
    /// there and its delays hold, as for every other passcode check (on the copy, it would be
    /// forgotten with it).
    private static func checkPasscode(_ passcode: String?, of target: URL) throws {
        let device = try Device.powerOn(at: target)
        defer { device.powerOff() }
        guard try device.status().passcodeSet else { return }
        guard let passcode else {
            throw KeychainError(.authFailed, "\(target.path) has a passcode; give it with --passcode to restore onto it.")
        }
        try device.unlock(passcode: passcode)
    }

    /// Restores straight into a powered-on, unlocked device, with no copy aside: for scratch
    /// devices (a fork, a new device made to try a path) that a failure part-way costs nothing.
    package static func restore(
        _ archive: URL, password: Data?, into device: Device, progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> RestoreReport {
        let reader = try ArchiveReader(contentsOf: archive)
        return try restore(reader, keys: try reader.sectionKeys(password: password, device: device.backupKeys), into: device, progress: progress)
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
                authenticity: reader.authenticity(device: device.backupKeys)))
        try progress(0, expected)
        let manifest = try reader.read(keys: keys) { kind, data in
            try importer.add(kind, data)
            try progress(importer.done, max(expected, importer.done))
        }
        var report = importer.report
        report.neverExported = manifest.counts.filter { $0.key.hasPrefix("notExported.") }
            .reduce(into: [:]) { $0[String($1.key.dropFirst("notExported.".count))] = $1.value }
        // The last chance to stop, after the costly import: from here the swap goes through.
        try progress(importer.done, importer.done)
        return report
    }

    /// Why an item that opened does not come back, or nil when it does.
    private static func decide(_ record: ItemRecord, onTarget: ItemChange?) -> RestoreReport.Reason? {
        guard let onTarget else { return nil }
        if onTarget.isTombstone, let deleted = onTarget.tombstoneDate, deleted > record.modificationDate { return .newerTombstone }
        if !onTarget.isTombstone, onTarget.record.modificationDate > record.modificationDate { return .newerOnDevice }
        return nil
    }

    /// Takes an archive's sections as they are read, one in memory at a time: apps first (their
    /// groups decide which items have a home), then each keychain section opened on every core
    /// and written, and each piece of a sandbox file appended where it belongs. A crafted
    /// archive costs a restore no more memory than a section.
    private struct Importer {
        let device: Device
        let keys: SectionKeys
        var report: RestoreReport
        /// Items and files done, for progress.
        private(set) var done = 0
        /// The target's synchronizable items, as they were before the restore, by primary key.
        private let synchronizedOnTarget: [PrimaryKey: ItemChange]
        private var entitledGroups: Set<String>?
        /// The file whose pieces are arriving, and how many bytes of it are written.
        private var currentFile: (id: String, bytes: Int)?

        init(device: Device, keys: SectionKeys, report: RestoreReport) throws {
            self.device = device
            self.keys = keys
            self.report = report
            synchronizedOnTarget = try device.deviceKeychain.changes(since: 0).filter(\.record.synchronizable)
                .reduce(into: [:]) { $0[$1.record.primaryKey] = $1 }
            try device.deviceKeychain.deleteNonSynchronizableItems()
        }

        /// Items and files the manifest counts.
        static func expectedWork(_ manifest: ArchiveManifest) -> Int {
            manifest.counts.filter { $0.key.hasPrefix("items.") }.values.reduce(0, +) + (manifest.counts["sandboxFiles"] ?? 0)
        }

        mutating func add(_ kind: SectionKind, _ data: Data) throws {
            switch kind {
            case .apps:
                guard entitledGroups == nil else { throw ArchiveError.inconsistent("its apps come after its items or files") }
                for app in try JSONDecoder().decode([AppManifest].self, from: data) {
                    if (try? device.app(app.bundleID)) != nil { try device.uninstall(bundleID: app.bundleID) }
                    try device.install(app)
                    report.apps.append(app.bundleID)
                }
            case .keychain:
                // Older archives carry the device's own items; a device keeps its own instead.
                try restore(try decoded(data, kind) { try ArchivedItem(decoding: $0) }.filter { $0.accessGroup != Device.ownAccessGroup })
            case .sandbox:
                for entry in try decoded(data, kind, { try SandboxEntry(decoding: $0) }) { try restore(entry) }
            case .manifest:
                break
            }
        }

        private mutating func restore(_ items: [ArchivedItem]) throws {
            guard report.items.count + items.count <= ArchiveFormat.maximumItems else {
                throw ArchiveError.inconsistent("it holds more than \(ArchiveFormat.maximumItems) keychain items")
            }
            let groups = try groupsWithAnApp()
            // Opening is the costly part: done on every core.
            let keybag = keys.backupKeybag
            let deviceKey = device.backupKeys.items
            let binding = keys.items
            let opened = try ParallelMap.map(items) { item -> ItemRecord? in
                let key = item.wrapping == .backup ? keybag?.key(for: item.protection) : deviceKey
                return key.flatMap { try? item.open(with: $0, binding: binding) }
            }
            var restored: [ItemRecord] = []
            for (item, record) in zip(items, opened) {
                let outcome: RestoreReport.Reason?
                var name = item.name
                var waitsForApp = false
                if let record {
                    name = name ?? ArchivedItem.name { record.attributes[$0] }
                    outcome = DeviceRestore.decide(record, onTarget: synchronizedOnTarget[record.primaryKey])
                    if outcome == nil { restored.append(record) }
                    waitsForApp = outcome == nil && !groups.contains(record.accessGroup)
                } else {
                    // Sealed with the password's keys and still shut: altered. Sealed with a
                    // device's key: altered on that device, else bound to it.
                    outcome =
                        item.wrapping == .backup || report.sameDevice
                        ? .damaged
                        : item.protection.isThisDeviceOnly
                            ? .deviceBound
                            : .unencryptedOnAnotherDevice
                }
                report.items.append(.init(item, name: name, reason: outcome, waitingForApp: waitsForApp))
            }
            try device.deviceKeychain.restore(restored)
            done += items.count
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
            try device.sandbox(for: entry.bundleID).restoreFile(
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
        private func decoded<Entry>(_ data: Data, _ kind: SectionKind, _ entry: (ArraySlice<UInt8>) throws -> Entry) throws -> [Entry] {
            do {
                return try EntryList.decode(data).map(entry)
            } catch {
                throw ArchiveError.inconsistent("a \(kind) section does not decode")
            }
        }
    }
}

/// What a restore did with every item of the archive, and why.
public struct RestoreReport: Codable, Sendable {
    /// The archive came from the target itself (same hardware identity).
    public var sameDevice: Bool
    public var mode: ArchiveMode
    /// What proved the archive's sections genuine: its password, the target (the device that
    /// wrote an unencrypted archive), or nothing but checksums (an unencrypted archive from
    /// another device, whose apps and files anyone could have written).
    public var authenticity: ArchiveAuthenticity
    public var items: [ItemOutcome] = []
    /// Items the source never exported, by `CLASS.PROTECTION`: they are not in the archive.
    public var neverExported: [String: Int] = [:]
    public var apps: [String] = []
    public var sandboxFiles = 0

    public struct ItemOutcome: Codable, Sendable {
        public var uuid: UUID
        public var itemClass: ItemClass
        public var protection: ProtectionClass
        public var synchronizable: Bool
        public var accessGroup: String
        /// `account @ service` and the like: from an encrypted archive, or from the item itself
        /// once it opened.
        public var name: String?
        public var restored: Bool
        public var reason: Reason?
        /// Restored, but no installed app is entitled to its access group yet: the item is seen
        /// once one is installed.
        public var waitingForApp: Bool

        init(_ item: ArchivedItem, name: String?, reason: Reason?, waitingForApp: Bool) {
            uuid = item.uuid
            self.name = name
            itemClass = item.itemClass
            protection = item.protection
            synchronizable = item.synchronizable
            accessGroup = item.accessGroup
            restored = reason == nil
            self.reason = reason
            self.waitingForApp = waitingForApp
        }

        // Spelled as everywhere a user reads items: `"class": "genericPassword"`,
        // `"accessible": "whenUnlocked"`, and the reason as a sentence beside its code.
        private enum CodingKeys: String, CodingKey {
            case uuid, itemClass = "class", protection = "accessible", synchronizable, accessGroup, name, restored, reason, why, waitingForApp
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(uuid, forKey: .uuid)
            try container.encode(itemClass.name, forKey: .itemClass)
            try container.encode(protection.name, forKey: .protection)
            try container.encode(synchronizable, forKey: .synchronizable)
            try container.encode(accessGroup, forKey: .accessGroup)
            try container.encodeIfPresent(name, forKey: .name)
            try container.encode(restored, forKey: .restored)
            try container.encodeIfPresent(reason, forKey: .reason)
            try container.encodeIfPresent(reason?.sentence, forKey: .why)
            try container.encode(waitingForApp, forKey: .waitingForApp)
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func named<Value: AppleNamed>(_ key: CodingKeys) throws -> Value {
                let text = try container.decode(String.self, forKey: key)
                guard let value = Value(name: text) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "'\(text)' is not one of Apple's names")
                }
                return value
            }
            uuid = try container.decode(UUID.self, forKey: .uuid)
            itemClass = try named(.itemClass)
            protection = try named(.protection)
            synchronizable = try container.decode(Bool.self, forKey: .synchronizable)
            accessGroup = try container.decode(String.self, forKey: .accessGroup)
            name = try container.decodeIfPresent(String.self, forKey: .name)
            restored = try container.decode(Bool.self, forKey: .restored)
            reason = try container.decodeIfPresent(Reason.self, forKey: .reason)
            waitingForApp = try container.decode(Bool.self, forKey: .waitingForApp)
        }
    }

    public enum Reason: String, Codable, Sendable {
        /// ThisDeviceOnly: wrapped with the source device's hardware UID.
        case deviceBound
        /// From an unencrypted archive, whose items only the source device opens.
        case unencryptedOnAnotherDevice
        /// Deleted on the target after the backup was made (a newer tombstone).
        case newerTombstone
        /// The target's synchronizable copy is newer.
        case newerOnDevice
        /// The item does not open on the device that made it: damaged or altered.
        case damaged

        public var sentence: String {
            switch self {
            case .deviceBound: "device-bound (ThisDeviceOnly): only the device that made the backup can open it"
            case .unencryptedOnAnotherDevice: "unencrypted archive on another device: its keychain items open only on the device that made it"
            case .newerTombstone: "deleted on this device after the backup was made"
            case .newerOnDevice: "this device has a newer copy"
            case .damaged: "does not open: damaged or altered"
            }
        }
    }

    public var restoredCount: Int { items.filter(\.restored).count }
}
