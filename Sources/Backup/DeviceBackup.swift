import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// Makes a backup of a powered-on, unlocked device: its apps, every exportable keychain item
/// wrapped by the migration rules, and the apps' sandboxes.
public enum DeviceBackup {
    /// Writes the archive to `destination` (complete, or not at all) and returns its manifest.
    /// `progress` hears the items and files written so far, and their total.
    @discardableResult
    public static func create(
        from device: Device, to destination: URL, mode: ArchiveWriter.Mode, entropy: any EntropySource = SystemEntropy(),
        progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }
    ) throws -> ArchiveManifest {
        guard device.isProtectedDataAvailable else {
            throw DeviceError(.protectedDataUnavailable, "\(device.info.name) is locked; unlock it before a backup, as iOS requires.")
        }
        let writer = try ArchiveWriter(to: destination, mode: mode, deviceID: device.info.id, deviceName: device.info.name, entropy: entropy)
        var manifest = ArchiveManifest()

        let apps = try device.installedApps()
        try writer.append(.apps, try JSONEncoder.archive.encode(apps))
        manifest.counts["apps"] = apps.count

        let records = try device.deviceKeychain.changes(since: 0, includingData: true).filter { !$0.isTombstone }.map(\.record)
        let files = try sandboxFiles(device, apps)
        let total = records.count + files.count
        // Sealing is the costly part: done on every core, in chunks that bound memory.
        var batch = SectionBatch(kind: .keychain, writer: writer)
        let named = writer.header.mode == .encrypted
        for start in stride(from: 0, to: records.count, by: 10_000) {
            let chunk = records[start..<min(start + 10_000, records.count)]
            var work: [(ItemRecord, ArchivedItem.Wrapping, SymmetricKey)] = []
            for record in chunk {
                manifest.counts[CountName.items(record), default: 0] += 1
                guard let wrapping = ArchivedItem.wrapping(for: record.protection, mode: writer.header.mode) else {
                    manifest.counts[CountName.notExported(record), default: 0] += 1
                    continue
                }
                work.append((record, wrapping, wrapping == .backup ? writer.backupKeybag!.key(for: record.protection) : device.deviceBoundBackupKey))
            }
            let encoded = try ParallelMap.map(work) { record, wrapping, key in
                ArchivedItem(record, wrapping: wrapping, key: key, named: named, entropy: entropy).encoded
            }
            for entry in encoded { try batch.add(entry) }
            progress(start + chunk.count, total)
        }
        try batch.flush()

        batch = SectionBatch(kind: .sandbox, writer: writer)
        for (done, file) in files.enumerated() {
            let entries = try file.entries()
            for entry in entries { try batch.add(entry.encoded) }
            if !entries.isEmpty { manifest.counts["sandboxFiles", default: 0] += 1 }
            progress(records.count + done + 1, total)
        }
        try batch.flush()

        if writer.header.mode == .unencrypted {
            manifest.warnings.append("keychain items in this archive restore only onto the device that made it (\(device.info.name)).")
            if !files.isEmpty {
                manifest.warnings.append("app sandboxes are stored in plain: any secret an app keeps in UserDefaults or its files is readable from this archive.")
            }
        }
        let never = manifest.counts.filter { $0.key.hasPrefix("notExported.") }.values.reduce(0, +)
        if never > 0 {
            manifest.warnings.append("\(never) whenPasscodeSetThisDeviceOnly item\(never == 1 ? " is" : "s are") never exported and will not come back.")
        }
        return try writer.finish(manifest)
    }

    /// Names of the manifest's counts.
    enum CountName {
        static func items(_ record: ItemRecord) -> String { "items.\(record.itemClass.name).\(record.protection.name)" }
        static func notExported(_ record: ItemRecord) -> String { "notExported.\(record.itemClass.name).\(record.protection.name)" }
    }

    /// One sandbox file to carry: UserDefaults or a file under Documents.
    private struct SandboxFile {
        var bundleID: String
        var path: String
        var protection: FileProtection
        var read: () throws -> Data?

        /// The file in pieces that each fit a section.
        func entries() throws -> [SandboxEntry] {
            guard let contents = try read() else { return [] }
            let piece = ArchiveFormat.maximumSectionBytes / 2
            return stride(from: 0, to: max(contents.count, 1), by: piece).map { offset in
                SandboxEntry(bundleID: bundleID, path: path, protection: protection.rawValue, offset: offset,
                             contents: contents.subdata(in: offset..<min(offset + piece, contents.count)))
            }
        }
    }

    private static func sandboxFiles(_ device: Device, _ apps: [AppManifest]) throws -> [SandboxFile] {
        try apps.flatMap { app -> [SandboxFile] in
            let sandbox = try device.sandbox(for: app.bundleID)
            let defaults = SandboxFile(bundleID: app.bundleID, path: "Library/Preferences/\(app.bundleID).plist",
                                       protection: .completeUntilFirstUserAuthentication, read: { try sandbox.defaultsData() })
            return [defaults] + (try sandbox.files()).map { file in
                SandboxFile(bundleID: app.bundleID, path: "Documents/\(file.path)", protection: file.protection,
                            read: { try sandbox.readFile(file.path) })
            }
        }
    }
}

/// Collects encoded entries into sections no larger than a section may be.
private struct SectionBatch {
    let kind: SectionKind
    let writer: ArchiveWriter
    private var entries: [[UInt8]] = []
    private var bytes = 4

    init(kind: SectionKind, writer: ArchiveWriter) {
        self.kind = kind
        self.writer = writer
    }

    mutating func add(_ entry: [UInt8]) throws {
        if bytes + entry.count + 4 > ArchiveFormat.maximumSectionBytes { try flush() }
        entries.append(entry)
        bytes += entry.count + 4
    }

    mutating func flush() throws {
        guard !entries.isEmpty else { return }
        try writer.append(kind, EntryList.encode(entries))
        entries = []
        bytes = 4
    }
}
