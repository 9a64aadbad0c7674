package import Foundation
package import KeychainModel
package import KeychainStore
package import KeyferryCrypto

/// Makes a backup of a powered-on, unlocked device: its apps, every exportable keychain item
/// wrapped by the migration rules, and the apps' sandboxes.
package enum DeviceBackup {
    /// Writes the archive to `destination` (complete, or not at all) and returns its manifest.
    /// `progress` hears the items and files written so far, and their total, and once more
    /// just before the archive is put in place; it may throw to stop the backup, which then
    /// leaves no file behind.
    @discardableResult
    package static func create(
        from device: Device, to destination: URL, mode: ArchiveWriter.Mode, entropy: any EntropySource = SystemEntropy(),
        progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> ArchiveManifest {
        guard device.isProtectedDataAvailable else {
            throw DeviceError(.protectedDataUnavailable, "\(device.info.name) is locked; unlock it before a backup, as iOS requires.")
        }
        let writer = try ArchiveWriter(to: destination, mode: mode, device: device.backupKeys, deviceName: device.info.name, entropy: entropy)
        var manifest = ArchiveManifest()

        let apps = try device.installedApps()
        try writer.append(.apps, try JSONEncoder.archive.encode(apps))
        manifest.counts["apps"] = apps.count

        let files = try sandboxFiles(device, apps)
        var itemCount = 0

        // Rows are read in batches, their item keys re-wrapped and their ciphertexts packed and
        // compressed: reading the next batch overlaps with the work on this one, on every core.
        let keys = ItemKeys(
            mode: writer.header.mode, backupKeybag: writer.backupKeybag, deviceKey: device.backupKeys.items,
            binding: writer.itemBinding)
        let damaged = try device.deviceKeychain.forEachExportBatch(secrets: .sealed) { items in
            try KeychainSections(items, keys: keys, entropy: entropy)
        } consume: { pieces, done, total in
            for piece in pieces {
                for (kind, count) in piece.counts {
                    manifest.counts[CountName.items(kind.itemClass, kind.protection), default: 0] += count
                    if keys.key(for: kind.protection) == nil {
                        manifest.counts[CountName.notExported(kind.itemClass, kind.protection), default: 0] += count
                    }
                }
                for (name, count) in piece.neverExported { manifest.counts[name, default: 0] += count }
                for section in piece.sections { try writer.append(section) }
            }
            itemCount = total
            try progress(done, total + files.count)
        }

        // Files are read one by one and compressed, a few sections at a time, on every core.
        var sandbox = SectionBuilder()
        for (done, file) in files.enumerated() {
            let entries = try file.entries()
            for entry in entries { sandbox.add(entry.encoded) }
            if !entries.isEmpty { manifest.counts["sandboxFiles", default: 0] += 1 }
            if sandbox.completed.count >= 4 { try append(sandbox.takeCompleted(), .sandbox, to: writer) }
            try progress(itemCount + done + 1, itemCount + files.count)
        }
        try append(sandbox.takeAll(), .sandbox, to: writer)

        if let warning = DamagedItem.leftOut(damaged) { manifest.warnings.append(warning) }
        if writer.header.mode == .unencrypted {
            manifest.warnings.append("keychain items in this archive restore only onto the device that made it (\(device.info.name)).")
            if !files.isEmpty {
                manifest.warnings.append(
                    "app sandboxes are stored in plain: any secret an app keeps in UserDefaults or its files is readable from this archive.")
            }
        }
        let never = manifest.counts.filter { $0.key.hasPrefix("notExported.") }.values.reduce(0, +)
        if never > 0 {
            manifest.warnings.append(
                "\(never) item\(never == 1 ? " is" : "s are") never exported (whenPasscodeSetThisDeviceOnly, Secure Enclave keys, or access control that asks for the user) and will not come back."
            )
        }
        try progress(itemCount + files.count, itemCount + files.count)
        let finished = try writer.finish(manifest)
        // The archive is in place; forgetting when it was made costs only the freshness warning.
        try? device.recordBackup(created: writer.header.created)
        return finished
    }

    /// An encrypted archive under a one-time random key, which is returned and never written:
    /// for archives only this process reads (a transfer in transit, scratch devices). The key is
    /// random, not a password people chose, so stretching it would add nothing.
    package static func createUnderRandomKey(
        from device: Device, to destination: URL, progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }
    ) throws -> Data {
        let key = Data(SystemEntropy().bytes(SymmetricKey.byteCount))
        try create(from: device, to: destination, mode: .encrypted(password: key, parameters: .minimum), progress: progress)
        return key
    }

    private static func append(_ contents: [Data], _ kind: SectionKind, to writer: ArchiveWriter) throws {
        for section in try CompressedSection.compressing(contents, as: kind) { try writer.append(section) }
    }

    /// Names of the manifest's counts.
    package enum CountName {
        static func items(_ itemClass: ItemClass, _ protection: ProtectionClass) -> String { "items.\(itemClass.name).\(protection.name)" }
        static func notExported(_ itemClass: ItemClass, _ protection: ProtectionClass) -> String { "notExported.\(itemClass.name).\(protection.name)" }
        /// Items left out whatever their class: the reason stands for the protection class.
        package static func neverExported(_ itemClass: ItemClass, _ reason: NeverExported) -> String { "notExported.\(itemClass.name).\(reason.rawValue)" }
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
                SandboxEntry(
                    bundleID: bundleID, path: path, protection: protection.rawValue, offset: offset,
                    contents: contents.subdata(in: offset..<min(offset + piece, contents.count)))
            }
        }
    }

    /// The apps' sandboxes, then the app groups' shared containers (backed up as iOS backs up
    /// an `AppDomainGroup`).
    private static func sandboxFiles(_ device: Device, _ apps: [AppManifest]) throws -> [SandboxFile] {
        let containers = try apps.map { try device.sandbox(for: $0.bundleID) } + (try device.groupContainers()).map { try device.container($0) }
        return try containers.flatMap { sandbox -> [SandboxFile] in
            let defaults = SandboxFile(
                bundleID: sandbox.bundleID, path: sandbox.defaultsPath,
                protection: .completeUntilFirstUserAuthentication, read: { try sandbox.defaultsData() })
            return [defaults]
                + (try sandbox.files()).map { file in
                    SandboxFile(
                        bundleID: sandbox.bundleID, path: sandbox.archivePath(ofFile: file.path), protection: file.protection,
                        read: { try sandbox.readFile(file.path) })
                }
        }
    }
}

/// The keys items are wrapped with, by the migration rules, derived once per backup.
private struct ItemKeys: Sendable {
    let mode: ArchiveMode
    let binding: ItemBinding
    private let keys: [ProtectionClass: (ArchivedItem.Wrapping, SymmetricKey)]

    init(mode: ArchiveMode, backupKeybag: BackupKeybag?, deviceKey: SymmetricKey, binding: ItemBinding) {
        self.mode = mode
        self.binding = binding
        var keys: [ProtectionClass: (ArchivedItem.Wrapping, SymmetricKey)] = [:]
        for protection in ProtectionClass.allCases {
            switch ArchivedItem.wrapping(for: protection, mode: mode) {
            case .backup: if let key = backupKeybag?.key(for: protection) { keys[protection] = (.backup, key) }
            case .device: keys[protection] = (.device, deviceKey)
            case nil: break
            }
        }
        self.keys = keys
    }

    /// The wrapping and key for an item of `protection`; nil for items never exported.
    func key(for protection: ProtectionClass) -> (ArchivedItem.Wrapping, SymmetricKey)? { keys[protection] }
}

/// Keychain items as the archive carries them: compressed sections, and the items read,
/// counted by kind (those never exported included). Made one core to a piece of a batch, so
/// it does its work in sequence.
private struct KeychainSections: Sendable {
    struct Kind: Hashable, Sendable {
        var itemClass: ItemClass
        var protection: ProtectionClass
    }

    var counts: [Kind: Int] = [:]
    /// Items left out whatever their class (Secure Enclave keys, access control that asks for
    /// the user), by count name.
    var neverExported: [String: Int] = [:]
    var sections: [CompressedSection] = []

    init(_ items: [ExportedItem], keys: ItemKeys, entropy: any EntropySource) throws {
        let named = keys.mode == .encrypted
        var builder = SectionBuilder()
        // Every nonce of the piece in one draw: a draw is a system call.
        let nonces = entropy.bytes(items.count * AEAD.nonceByteCount)
        for (index, item) in items.enumerated() {
            if let reason = item.neverExported {
                neverExported[DeviceBackup.CountName.neverExported(item.itemClass, reason), default: 0] += 1
                continue
            }
            counts[Kind(itemClass: item.itemClass, protection: item.protection), default: 0] += 1
            guard let (wrapping, key) = keys.key(for: item.protection) else { continue }
            guard case .sealed(let seal) = item.secret else { preconditionFailure("a backup exports its items sealed") }
            let nonce = Array(nonces[(index * AEAD.nonceByteCount)..<((index + 1) * AEAD.nonceByteCount)])
            builder.add(ArchivedItem(item, seal: seal, wrapping: wrapping, key: key, binding: keys.binding, named: named, nonce: nonce).encoded)
        }
        sections = try builder.takeAll().map { try CompressedSection(.keychain, $0) }
    }
}

/// Collects encoded entries into section contents no larger than a section may be.
private struct SectionBuilder {
    /// Contents that are full: the next entry did not fit.
    private(set) var completed: [Data] = []
    private var entries: [[UInt8]] = []
    private var bytes = 4

    mutating func add(_ entry: [UInt8]) {
        if !entries.isEmpty, bytes + entry.count + 4 > ArchiveFormat.maximumSectionBytes { close() }
        entries.append(entry)
        bytes += entry.count + 4
    }

    mutating func takeCompleted() -> [Data] {
        defer { completed = [] }
        return completed
    }

    mutating func takeAll() -> [Data] {
        close()
        return takeCompleted()
    }

    private mutating func close() {
        guard !entries.isEmpty else { return }
        completed.append(EntryList.encode(entries))
        entries = []
        bytes = 4
    }
}
