import AppleFormats
import Backup
import Crypto
package import Foundation
import KeychainModel
package import KeychainStore
import KeyferryCrypto
import KeyferrySystem
import KeyferryThreads

/// Writes a powered-on, unlocked device as a phone writes a Finder or iTunes backup (iOS 10.2
/// and later, `IOS-BACKUP.md`): `Info.plist`, `Manifest.plist` with the backup keybag,
/// `Status.plist`, an encrypted `Manifest.db` and one encrypted blob per file. Apple's export
/// rules decide what goes in: each app's Documents and UserDefaults, and every keychain item but
/// `akpu` ones and those whose access control asks for the user, ThisDeviceOnly items under class
/// keys tied to this device.
package enum PhoneBackupWriter {
    package struct Options: Sendable {
        /// nil writes an unencrypted backup: files in plain, every keychain item tied to this device.
        package var password: Data?
        /// PBKDF2-SHA256 rounds of the keybag: a phone's 10,000,000 unless a test asks for less.
        package var dataProtectionRounds: UInt32

        package init(password: Data?, dataProtectionRounds: UInt32 = 10_000_000) {
            self.password = password
            self.dataProtectionRounds = dataProtectionRounds
        }
    }

    /// What went in, and what Apple's rules left out.
    package struct Summary: Codable, Sendable {
        package var udid: String
        package var encrypted: Bool
        package var apps: Int
        package var files: Int
        package var keychainItems: Int
        /// Left out, by `CLASS.PROTECTION` (never exported) and `CLASS.accessControl` (asks for the user).
        package var leftOut: [String: Int]
        package var warnings: [String]
    }

    /// The stages `progress` hears about: deriving the password's key (seconds at a phone's
    /// cost), then items and files done of their total.
    package enum Progress: Sendable {
        case derivingKey(rounds: UInt32)
        case writing(done: Int, total: Int)
    }

    /// Writes the backup folder `destination` (which must not exist), complete or not at all:
    /// it is built beside, then renamed into place. `progress` may throw to stop.
    @discardableResult
    package static func create(
        from device: Device, to destination: URL, options: Options, progress: (Progress) throws -> Void = { _ in }
    ) throws -> Summary {
        guard device.isProtectedDataAvailable else {
            throw DeviceError(.protectedDataUnavailable, "\(device.info.name) is locked; unlock it before a backup, as iOS requires.")
        }
        guard !FileManager.default.fileExists(atPath: destination.path) else { throw PhoneBackupError.exists(destination.path) }
        let staging = destination.deletingLastPathComponent().appendingPathComponent("\(stagingPrefix(destination))\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        var placed = false
        defer { if !placed { try? FileManager.default.removeItem(at: staging) } }

        let deviceKey = device.backupKeys.phoneDeviceKey.withUnsafeBytes { Crypto.SymmetricKey(data: $0) }
        if options.password != nil { try progress(.derivingKey(rounds: options.dataProtectionRounds)) }
        let keys = try WritingKeys(password: options.password, dataProtectionRounds: options.dataProtectionRounds, deviceKey: deviceKey)
        var writer = BlobWriter(folder: PhoneBackupFolder(root: staging), keys: keys)
        let udid = PhoneIdentity.udid(device.info.id)
        let apps = try device.installedApps()
        let files = try sandboxFiles(device, apps)

        // The keychain first: its items are sealed on every core while the store is read.
        var tables: [String: [KeychainBackupPlist.Entry]] = [:]
        var leftOut: [String: Int] = [:]
        var itemCount = 0
        var total = files.count + 1
        let damaged = try device.deviceKeychain.forEachExportBatch(secrets: .opened) { items in
            let itemKeys = FreshKeys(count: items.count)
            return try items.enumerated().map { try KeychainEntry(item: $1, keys: keys, itemKey: itemKeys[$0]) }
        } consume: { pieces, done, count in
            for entry in pieces.joined() {
                switch entry {
                case .sealed(let table, let sealed):
                    tables[table, default: []].append(
                        .init(data: sealed, persistentReference: KeychainBackupPlist.persistentReference(table: table, row: UInt64(itemCount + 1))))
                    itemCount += 1
                case .leftOut(let name): leftOut[name, default: 0] += 1
                }
            }
            total = count + files.count + 1
            try progress(.writing(done: done, total: total))
        }
        let keychain = KeychainBackupPlist(entries: tables, keybagUUID: keys.keybag.uuidString)
        try writer.add(
            domain: PhoneDomain.keychain, path: PhoneDomain.keychainFile, contents: BinaryPropertyList.encode(keychain.propertyList),
            fileClass: 1, mode: 0o100400, userID: 0)

        // Files a few at a time, each group read and sealed on every core, then recorded.
        var fileCount = 0
        var done = itemCount + 1
        for group in SandboxFile.groups(files) {
            let read = try group.compactMap { file in
                try file.read().map {
                    (domain: PhoneDomain.container(file.bundleID), path: file.path, contents: $0, fileClass: PhoneClass.file(file.protection))
                }
            }
            let sealer = writer.sealer
            let sealed = try ParallelMap.map(read) { try sealer.seal(domain: $0.domain, path: $0.path, contents: $0.contents, fileClass: $0.fileClass) }
            for file in sealed {
                writer.record(file)
                fileCount += 1
            }
            done += group.count
            try progress(.writing(done: done, total: total))
        }
        for app in apps { writer.addDirectory(domain: PhoneDomain.app(app.bundleID), path: "") }
        for group in try device.groupContainers() { writer.addDirectory(domain: PhoneDomain.container(group), path: "") }
        writer.addDirectory(domain: PhoneDomain.keychain, path: "")
        try writer.finish()

        let now = Date()
        let passcodeSet = try device.passcodeIsSet()
        try PhoneManifest(
            encrypted: options.password != nil, keybag: keys.keybag, manifestKey: writer.manifestKey, udid: udid, deviceName: device.info.name,
            applications: apps, date: now, wasPasscodeSet: passcodeSet, leftOut: leftOut
        ).write(to: PhoneBackupFolder(root: staging))

        var warnings: [String] = []
        if let warning = DamagedItem.leftOut(damaged) { warnings.append(warning) }
        let never = leftOut.values.reduce(0, +)
        if never > 0 {
            warnings.append(
                "\(never) keychain item\(never == 1 ? " is" : "s are") never in an iOS backup (whenPasscodeSetThisDeviceOnly, or access control that asks for the user)."
            )
        }
        if options.password != nil, let weak = PhoneBackupReader.weakRoundsWarning(options.dataProtectionRounds) { warnings.append(weak + ".") }
        if options.password == nil {
            warnings.append("unencrypted: every keychain item restores onto \(device.info.name) only, and the apps' files and UserDefaults are in plain.")
        }
        // Never in place of a folder that appeared meanwhile.
        do {
            try Placement.moveDirectory(staging, to: destination)
        } catch {
            throw FileManager.default.fileExists(atPath: destination.path) ? PhoneBackupError.exists(destination.path) : error
        }
        placed = true
        try? device.recordBackup(created: now)
        return Summary(
            udid: udid, encrypted: options.password != nil, apps: apps.count, files: fileCount, keychainItems: itemCount, leftOut: leftOut,
            warnings: warnings)
    }

    /// Whether a backup to `destination` is being built beside it (`.NAME.writing-UUID`).
    package static func isWriting(_ destination: URL) -> Bool {
        let prefix = stagingPrefix(destination)
        let siblings = (try? FileManager.default.contentsOfDirectory(atPath: destination.deletingLastPathComponent().path)) ?? []
        return siblings.contains { $0.hasPrefix(prefix) }
    }

    private static func stagingPrefix(_ destination: URL) -> String { ".\(destination.lastPathComponent).writing-" }

    /// One sandbox file: UserDefaults or a file under Documents, read when it is written.
    private struct SandboxFile {
        var bundleID: String
        var path: String
        var protection: FileProtection
        var bytes: Int
        var read: () throws -> Data?

        /// Files in groups of at most eight and 64 MiB (a larger file alone): what is held in
        /// memory at once while a group is sealed on every core.
        static func groups(_ files: [SandboxFile]) -> [[SandboxFile]] {
            var groups: [[SandboxFile]] = []
            var bytes = 0
            for file in files {
                if let last = groups.last, last.count < 8, bytes + file.bytes <= 64 << 20 {
                    groups[groups.count - 1].append(file)
                    bytes += file.bytes
                } else {
                    groups.append([file])
                    bytes = file.bytes
                }
            }
            return groups
        }
    }

    /// The apps' sandboxes, then the app groups' containers (`AppDomainGroup-…` domains).
    private static func sandboxFiles(_ device: Device, _ apps: [AppManifest]) throws -> [SandboxFile] {
        let containers = try apps.map { try device.sandbox(for: $0.bundleID) } + (try device.groupContainers()).map { try device.container($0) }
        return try containers.flatMap { sandbox -> [SandboxFile] in
            [
                SandboxFile(
                    bundleID: sandbox.bundleID, path: sandbox.defaultsPath, protection: .completeUntilFirstUserAuthentication, bytes: 0,
                    read: { try sandbox.defaultsData() })
            ]
                + (try sandbox.files()).map { file in
                    SandboxFile(
                        bundleID: sandbox.bundleID, path: sandbox.archivePath(ofFile: file.path), protection: file.protection, bytes: file.bytes,
                        read: { try sandbox.readFile(file.path) })
                }
        }
    }
}

/// The keybag of one backup and the class keys it wraps: made fresh each time.
struct WritingKeys: Sendable {
    let keybag: BackupKeybag
    /// By class number; nil for an unencrypted backup's file classes (files are in plain).
    let classKeys: [UInt32: Crypto.SymmetricKey]
    var encrypted: Bool { classKeys[1] != nil }

    init(password: Data?, dataProtectionRounds: UInt32, deviceKey: Crypto.SymmetricKey) throws {
        func random(_ count: Int) -> [UInt8] { Array(Crypto.SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.prefix(count)) }
        var keybag = BackupKeybag(
            uuid: random(16), hmacKey: random(32) + random(8), salt: random(20), iterations: PhoneIdentity.rounds,
            dataProtectionIterations: dataProtectionRounds, dataProtectionSalt: random(20), classes: [])
        var keys: [UInt32: Crypto.SymmetricKey] = [:]
        if let password {
            let passwordKey = try keybag.passwordKey(password)
            for number in PhoneClass.fileClasses + PhoneClass.keychainClasses {
                let key = Crypto.SymmetricKey(size: .bits256)
                // Class 5 and the ThisDeviceOnly classes are tied to the device, then wrapped.
                let tied = number == 5 || PhoneClass.thisDeviceOnly.contains(number)
                let stored = tied ? try BackupKeybag.tangled(key, deviceKey: deviceKey) : key
                keybag.classes.append(
                    .init(
                        uuid: random(16), protectionClass: number,
                        wrap: tied ? BackupKeybag.ClassKey.deviceWrap | BackupKeybag.ClassKey.passwordWrap : BackupKeybag.ClassKey.passwordWrap,
                        wrappedKey: Array(try AES.KeyWrap.wrap(stored, using: passwordKey))))
                keys[number] = key
            }
        } else {
            // Unencrypted: no password, so every keychain class key is the device's alone.
            keybag.dataProtectionIterations = 1
            keybag.iterations = 1
            for number in PhoneClass.keychainClasses {
                let key = Crypto.SymmetricKey(size: .bits256)
                keybag.classes.append(
                    .init(
                        uuid: random(16), protectionClass: number, wrap: BackupKeybag.ClassKey.deviceWrap,
                        wrappedKey: Array(try AES.KeyWrap.wrap(key, using: deviceKey))))
                keys[number] = key
            }
        }
        self.keybag = keybag
        classKeys = keys
    }
}

extension BackupKeybag {
    /// The UUID as `keychain-backup.plist` names it: lowercase, with dashes.
    var uuidString: String {
        guard uuid.count == 16 else { return "" }
        let hex = uuid.map { String(format: "%02x", $0) }.joined()
        var parts: [Substring] = []
        var rest = Substring(hex)
        for length in [8, 4, 4, 4, 12] {
            parts.append(rest.prefix(length))
            rest = rest.dropFirst(length)
        }
        return parts.joined(separator: "-")
    }
}

/// Fresh keys drawn from the system in one call: a backup of 100,000 items needs 100,000.
private struct FreshKeys {
    private let bytes: [UInt8]

    init(count: Int) {
        bytes = count == 0 ? [] : Crypto.SymmetricKey(size: SymmetricKeySize(bitCount: 256 * count)).withUnsafeBytes { Array($0) }
    }

    subscript(index: Int) -> Crypto.SymmetricKey { Crypto.SymmetricKey(data: bytes[index * 32..<(index + 1) * 32]) }
}

/// One exported item as the backup carries it, or why it is left out.
private enum KeychainEntry: Sendable {
    case sealed(table: String, Data)
    case leftOut(String)

    init(item: ExportedItem, keys: WritingKeys, itemKey: Crypto.SymmetricKey) throws {
        let name = "\(item.itemClass.name).\(item.protection.name)"
        if let reason = item.neverExported {
            self = .leftOut("\(item.itemClass.name).\(reason.rawValue)")
            return
        }
        guard let number = PhoneClass.keychain(item.protection), let classKey = keys.classKeys[number] else {
            self = .leftOut(name)
            return
        }
        let record = ItemRecord(
            itemClass: item.itemClass, uuid: item.uuid, accessGroup: item.accessGroup, protection: item.protection, synchronizable: item.synchronizable,
            accessControl: nil, creationDate: item.creationDate, modificationDate: item.modificationDate, attributes: try item.attributes.decoded(),
            data: item.data ?? Data())
        let plaintext = try DERPropertyList.encode(PhoneKeychainItem.attributes(record))
        let sealed = try SealedKeychainItem(sealing: Array(plaintext), protectionClass: number, classKey: classKey, itemKey: itemKey)
        self = .sealed(table: item.itemClass.rawValue, Data(sealed.bytes))
    }
}

/// Seals a file into its blob, written into the folder: on any thread, for files sealed side by side.
private struct BlobSealer: Sendable {
    let folder: PhoneBackupFolder
    let keys: WritingKeys

    /// The blob under a fresh key (in plain when unencrypted), and the file's row.
    func seal(domain: String, path: String, contents: Data, fileClass: UInt32, mode: Int64 = 0o100644, userID: Int64 = 501) throws -> ManifestRow {
        let id = BackupFileCrypto.fileID(domain: domain, relativePath: path)
        var key: ClassWrappedKey?
        var blob = contents
        if let classKey = keys.classKeys[fileClass] {
            let fileKey = Crypto.SymmetricKey(size: .bits256)
            key = try ClassWrappedKey(wrapping: fileKey, protectionClass: fileClass, under: classKey)
            blob = try BackupFileCrypto.seal(contents, key: fileKey)
        }
        let url = try folder.blob(id)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try blob.write(to: url)
        var record = BackupFileRecord(
            relativePath: path, size: Int64(contents.count), mode: mode, protectionClass: Int64(fileClass), encryptionKey: key)
        record.userID = userID
        record.groupID = userID
        return ManifestRow(fileID: id, domain: domain, relativePath: path, flags: ManifestRow.regularFile, file: record)
    }
}

/// Collects the rows of `Manifest.db`, directories included, and writes it.
private struct BlobWriter {
    let sealer: BlobSealer
    private(set) var manifestKey: ClassWrappedKey?
    private var rows: [String: ManifestRow] = [:]
    private var inode: Int64 = 1

    private var folder: PhoneBackupFolder { sealer.folder }
    private var keys: WritingKeys { sealer.keys }

    init(folder: PhoneBackupFolder, keys: WritingKeys) {
        sealer = BlobSealer(folder: folder, keys: keys)
    }

    /// A regular file sealed, written and recorded.
    mutating func add(domain: String, path: String, contents: Data, fileClass: UInt32, mode: Int64 = 0o100644, userID: Int64 = 501) throws {
        record(try sealer.seal(domain: domain, path: path, contents: contents, fileClass: fileClass, mode: mode, userID: userID))
    }

    /// A sealed file's row, with its parent directories.
    mutating func record(_ row: ManifestRow) {
        var row = row
        stamp(&row.file)
        rows[row.fileID] = row
        var parent = (row.relativePath as NSString).deletingLastPathComponent
        while !parent.isEmpty {
            addDirectory(domain: row.domain, path: parent)
            parent = (parent as NSString).deletingLastPathComponent
        }
    }

    mutating func addDirectory(domain: String, path: String) {
        let id = BackupFileCrypto.fileID(domain: domain, relativePath: path)
        guard rows[id] == nil else { return }
        var record = BackupFileRecord(relativePath: path, size: 0, mode: 0o040755, protectionClass: 0, encryptionKey: nil)
        stamp(&record)
        rows[id] = ManifestRow(fileID: id, domain: domain, relativePath: path, flags: ManifestRow.directory, file: record)
    }

    private mutating func stamp(_ record: inout BackupFileRecord) {
        let now = Int64(Date().timeIntervalSince1970)
        record.inode = inode
        record.birth = now
        record.lastModified = now
        record.lastStatusChange = now
        inode += 1
    }

    /// Writes `Manifest.db`: built in plain beside it, sealed under a fresh key of class 4.
    mutating func finish() throws {
        let plain = folder.root.appendingPathComponent(".Manifest.plain.db")
        defer { try? FileManager.default.removeItem(at: plain) }
        try ManifestDatabase.write(rows.values.sorted { ($0.domain, $0.relativePath) < ($1.domain, $1.relativePath) }, to: plain)
        let contents = try Data(contentsOf: plain)
        if let classKey = keys.classKeys[4] {
            let databaseKey = Crypto.SymmetricKey(size: .bits256)
            manifestKey = try ClassWrappedKey(wrapping: databaseKey, protectionClass: 4, under: classKey)
            try BackupFileCrypto.seal(contents, key: databaseKey).write(to: folder.manifestDatabase)
        } else {
            try contents.write(to: folder.manifestDatabase)
        }
    }
}
