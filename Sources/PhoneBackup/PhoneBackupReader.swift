import AppleFormats
import Crypto
package import Foundation
package import KeychainModel
package import KeychainStore
import KeyferryCrypto
import KeyferrySystem
import KeyferryThreads

/// A backup folder as a phone or Keyferry wrote it, read leniently and bounded: its manifest
/// before any password, then, opened, its files and keychain items.
package struct PhoneBackupReader: Sendable {
    let folder: PhoneBackupFolder
    let manifest: PhoneManifest

    /// The largest file blob read: a restore holds one file at a time.
    package static let maximumFileBytes = 512 << 20
    /// The most rows `Manifest.db` may have: a phone's has a few thousand.
    package static let maximumRows = 2_000_000

    /// Reads `Manifest.plist` (and `Status.plist`); nothing is decrypted.
    package init(folder url: URL) throws {
        guard PhoneBackupFolder.isBackupFolder(url) else { throw PhoneBackupError.malformed("\(url.path) is not a folder") }
        folder = PhoneBackupFolder(root: url)
        manifest = try PhoneManifest(folder: folder)
    }

    /// Whether `url` is a folder holding a `Manifest.plist`: an iOS backup, not a Keyferry archive.
    package static func isBackup(_ url: URL) -> Bool {
        PhoneBackupFolder.isBackupFolder(url) && FileManager.default.fileExists(atPath: url.appendingPathComponent("Manifest.plist").path)
    }

    package var isEncrypted: Bool { manifest.encrypted }
    package var udid: String { manifest.udid }
    package var deviceName: String { manifest.deviceName }
    package var productVersion: String { manifest.productVersion }
    package var date: Date? { manifest.date }
    package var applications: [String] { manifest.applications.map(\.bundleID) }
    package var leftOut: [String: Int] { manifest.leftOut }
    package var dataProtectionRounds: UInt32 { manifest.keybag.dataProtectionIterations }
    /// What an encrypted backup's password is worth, when its key takes fewer rounds than a phone's.
    package var weakPasswordWarning: String? {
        isEncrypted && manifest.keybag.hasDataProtectionStep ? Self.weakRoundsWarning(dataProtectionRounds) : nil
    }

    /// A warning for a password key of `dataProtectionRounds` rounds of PBKDF2-SHA256, fewer than
    /// a phone's: what a guess at the password then costs, in a phone backup's guesses.
    package static func weakRoundsWarning(_ dataProtectionRounds: UInt32) -> String? {
        let phoneRounds = PhoneIdentity.dataProtectionRounds
        guard dataProtectionRounds < phoneRounds else { return nil }
        let perGuess = UInt64(dataProtectionRounds) + UInt64(PhoneIdentity.rounds)
        let phone = UInt64(phoneRounds) + UInt64(PhoneIdentity.rounds)
        return "the password's key takes \(dataProtectionRounds.formatted()) rounds of PBKDF2-SHA256 where a phone's takes "
            + "\(phoneRounds.formatted()): each guess at the password costs about \((phone / perGuess).formatted()) times less "
            + "than against a phone's backup; fine for tests, weak for real secrets"
    }
    /// Whether `deviceID` names the Keyferry device that wrote this backup.
    package func wasWritten(by deviceID: UUID) -> Bool { PhoneIdentity.udid(deviceID) == manifest.udid }

    /// Opens the keybag (the password's key derivation: seconds at a phone's cost) and
    /// `Manifest.db`. `device`, the keys of the device the backup is read on, opens the classes
    /// tied to the device that made it when it is that device. `checkpoint` is called between
    /// rows of `Manifest.db` and throws to stop the read (an interrupt).
    package func open(password: Data?, device: DeviceBackupKeys?, checkpoint: () throws -> Void = {}) throws -> OpenedPhoneBackup {
        let deviceKey = device.flatMap { wasWritten(by: $0.deviceID) ? $0.phoneDeviceKey.withUnsafeBytes { Crypto.SymmetricKey(data: $0) } : nil }
        var passwordKey: Crypto.SymmetricKey?
        if manifest.encrypted {
            guard let password, !password.isEmpty else { throw PhoneBackupError.needsPassword }
            do {
                passwordKey = try manifest.keybag.passwordKey(password)
            } catch {
                throw PhoneBackupError.malformed("its keybag's key derivation failed: \(error)")
            }
        }
        let classKeys: [UInt32: Crypto.SymmetricKey]
        do {
            classKeys = try manifest.keybag.classKeys(with: passwordKey, deviceKey: deviceKey)
        } catch BackupKeybagError.wrongPassword {
            throw PhoneBackupError.wrongPassword
        }
        let opened = manifest.encrypted ? "the password opens its keybag (\(classKeys.count) class keys), but " : ""
        guard FileManager.default.fileExists(atPath: folder.manifestDatabase.path) else {
            if FileManager.default.fileExists(atPath: folder.root.appendingPathComponent("Manifest.mbdb").path)
                || PhoneBackupSurvey.generation(of: manifest.productVersion) == .beforeiOS10
            {
                throw PhoneBackupError.unsupported(
                    "\(opened)it is a backup of iOS \(manifest.productVersion.escapingControlCharacters), older than 10, whose file list is "
                        + "Manifest.mbdb, which Keyferry does not read")
            }
            throw PhoneBackupError.malformed("\(opened)Manifest.db is missing: no file or keychain item can be found without it")
        }
        let contents = try ManifestDatabase.read(try manifestDatabase(classKeys), maximumRows: Self.maximumRows, checkpoint: checkpoint)
        return OpenedPhoneBackup(
            folder: folder, manifest: manifest, classKeys: classKeys, rows: contents.rows, unreadableRecords: contents.unreadable,
            deviceKeyUsed: deviceKey != nil)
    }

    /// `Manifest.db`'s plaintext. iOS 10.0 and 10.1 encrypted a backup's files but not
    /// `Manifest.db`, and wrote no `ManifestKey`.
    private func manifestDatabase(_ classKeys: [UInt32: Crypto.SymmetricKey]) throws -> Data {
        let sealed = try Self.contents(of: folder.manifestDatabase, "Manifest.db", limit: Self.maximumFileBytes, in: folder.root)
        guard manifest.encrypted else { return sealed }
        guard let manifestKey = manifest.manifestKey else {
            guard sealed.starts(with: ManifestDatabase.sqliteHeader) else {
                throw PhoneBackupError.malformed("it is encrypted with no ManifestKey, and its Manifest.db is not in plain either")
            }
            return sealed
        }
        guard let classKey = classKeys[manifestKey.protectionClass] else {
            throw PhoneBackupError.malformed("its ManifestKey is of class \(manifestKey.protectionClass), which the keybag does not open")
        }
        do {
            return try BackupFileCrypto.open(sealed, key: try manifestKey.unwrap(with: classKey), requirePadding: false)
        } catch {
            throw PhoneBackupError.malformed("Manifest.db does not decrypt: \(error)")
        }
    }

    /// The bytes of a file of the backup, at most `limit` of them. Only a regular file in the
    /// folder itself is read: a symbolic link (the file, or the folder of two hex digits above
    /// a blob) could lead anywhere on this machine, and a FIFO or a device would never end.
    static func contents(of url: URL, _ name: String, limit: Int, in root: URL) throws -> Data {
        var place = url.deletingLastPathComponent()
        while place.path.count > root.path.count {
            let type = (try? FileManager.default.attributesOfItem(atPath: place.path))?[.type] as? FileAttributeType
            guard type != .typeSymbolicLink else { throw PhoneBackupError.malformed("\(name) is a symbolic link, which a backup never holds") }
            place.deleteLastPathComponent()
        }
        do {
            return try UntrustedFile.read(url.path, limit: limit)
        } catch .missing {
            throw PhoneBackupError.malformed("\(name) is missing")
        } catch .symbolicLink {
            throw PhoneBackupError.malformed("\(name) is a symbolic link, which a backup never holds")
        } catch .notRegular(let kind) {
            throw PhoneBackupError.malformed("\(name) is \(kind), not a file")
        } catch .tooLarge(let limit) {
            throw PhoneBackupError.malformed("\(name) is larger than \(limit >> 20) MiB")
        } catch .unreadable(let reason) {
            throw PhoneBackupError.malformed("\(name) cannot be read: \(reason)")
        }
    }
}

/// A backup whose keybag is open: its rows, and the means to read each file and keychain item.
package struct OpenedPhoneBackup: Sendable {
    let folder: PhoneBackupFolder
    let manifest: PhoneManifest
    let classKeys: [UInt32: Crypto.SymmetricKey]
    let rows: [ManifestRow]
    /// Rows of `Manifest.db` whose record does not decode, by name: never restored.
    let unreadableRecords: [String]
    /// The target is the device that made the backup: its tied classes were opened.
    let deviceKeyUsed: Bool

    package var fileCount: Int { rows.filter { $0.flags == ManifestRow.regularFile }.count }

    /// The plaintext of a regular file's blob. The decrypted length is the truth; a `Size` that
    /// disagrees is only reported (phones record stale sizes for files written during a backup).
    func contents(of row: ManifestRow) throws -> Data {
        let name = "\(row.domain)-\(row.relativePath)"
        let blob = try PhoneBackupReader.contents(
            of: try folder.blob(row.fileID), "the blob of \(name)", limit: PhoneBackupReader.maximumFileBytes, in: folder.root)
        guard manifest.encrypted else { return blob }
        guard let key = row.file.encryptionKey else { throw PhoneBackupError.malformed("\(name) has no EncryptionKey") }
        guard let classKey = classKeys[key.protectionClass] else {
            throw PhoneBackupError.malformed("\(name) is sealed under class \(key.protectionClass), which this keybag does not open here")
        }
        do {
            return try BackupFileCrypto.open(blob, key: try key.unwrap(with: classKey))
        } catch {
            throw PhoneBackupError.malformed("\(name) does not decrypt: \(error)")
        }
    }

    /// One keychain item of the backup, opened as far as it opens.
    package enum KeychainEntry: Sendable {
        case item(ItemRecord)
        /// Opened, but of a kind a phone never puts in a backup (`why`): not restored.
        case neverBackedUp(ItemRecord, why: String)
        case tombstone
        /// Not opened: the table and, when its header reads, the class.
        /// `uuid` names it in reports, the same each time the backup is read (from its bytes).
        case sealed(uuid: UUID, table: ItemClass, protection: ProtectionClass?, why: Why)

        package enum Why: Sendable {
            /// Its class key is tied to the device that made the backup.
            case sealedToSourceDevice
            /// A sealing Keyferry does not read (a version other than 3, or an unknown class).
            case unsupported(String)
            /// Its key or tag does not check: damaged or altered.
            case damaged
        }
    }

    /// Every item of `keychain-backup.plist`, in table order; none when the backup has no keychain.
    func keychain() throws -> [KeychainEntry] {
        guard let row = rows.first(where: { $0.domain == PhoneDomain.keychain && $0.relativePath == PhoneDomain.keychainFile }) else {
            let name = "\(PhoneDomain.keychain)-\(PhoneDomain.keychainFile) "
            if let unreadable = unreadableRecords.first(where: { $0.hasPrefix(name) }) {
                throw PhoneBackupError.malformed("the record of \(unreadable)")
            }
            return []
        }
        let plist: KeychainBackupPlist
        do {
            plist = try KeychainBackupPlist(propertyList: try BinaryPropertyList.decode(try contents(of: row)))
        } catch let error as PhoneBackupError {
            throw error
        } catch {
            throw PhoneBackupError.malformed("keychain-backup.plist: \(error)")
        }
        let backupDate = manifest.date ?? Date()
        let sealed = KeychainBackupPlist.tables.flatMap { table in
            ItemClass(rawValue: table).map { itemClass in (plist.entries[table] ?? []).map { (itemClass, $0.data) } } ?? []
        }
        // Opening is the costly part (an unwrap and GCM per item): on every core.
        return try ParallelMap.map(sealed) { itemClass, data in open(data, table: itemClass, backupDate: backupDate) }
    }

    private func open(_ data: Data, table: ItemClass, backupDate: Date) -> KeychainEntry {
        func unopened(_ protection: ProtectionClass?, why: KeychainEntry.Why) -> KeychainEntry {
            .sealed(uuid: PhoneKeychainItem.nameBasedUUID(Array(data)), table: table, protection: protection, why: why)
        }
        let sealed: SealedKeychainItem
        do {
            sealed = try SealedKeychainItem(bytes: data)
        } catch {
            return unopened(nil, why: .unsupported("\(error)"))
        }
        guard let protection = PhoneClass.protection(keychainClass: sealed.protectionClass) else {
            return unopened(nil, why: .unsupported("class \(sealed.protectionClass) is not a keychain class"))
        }
        guard let classKey = classKeys[sealed.protectionClass] else {
            let tied = manifest.keybag.sealedToDevice.contains(sealed.protectionClass)
            return unopened(protection, why: tied ? .sealedToSourceDevice : .unsupported("the keybag has no class \(sealed.protectionClass)"))
        }
        let plaintext: [UInt8]
        do {
            plaintext = try sealed.open(classKey: classKey)
        } catch {
            return unopened(protection, why: .damaged)
        }
        let attributes: PropertyList
        do {
            attributes = try DERPropertyList.decode(Data(plaintext))
        } catch {
            return unopened(protection, why: .unsupported("its attributes are not a DER property list (\(error))"))
        }
        switch PhoneKeychainItem.record(from: attributes, table: table, protection: protection, sealedBytes: Array(data), backupDate: backupDate) {
        case .item(let record): return .item(record)
        case .neverBackedUp(let record, let why): return .neverBackedUp(record, why: why)
        case .tombstone: return .tombstone
        case .unreadable(let why): return unopened(protection, why: .unsupported(why))
        }
    }
}

extension OpenedPhoneBackup {
    /// What `verify` found: every file decrypted and its padding checked, every keychain item
    /// opened as far as it opens here.
    package struct Verification: Codable, Sendable {
        package var files = 0
        package var bytes = 0
        /// Files whose recorded `Size` differs from what they decrypt to (phones record stale
        /// sizes for files written during a backup).
        package var sizeMismatches: [String] = []
        package var keychainItems = 0
        package var itemsOpened = 0
        package var itemsSealedToSourceDevice = 0
        package var itemsDamaged = 0
        package var itemsUnsupported = 0
        /// Items that open but that a phone never puts in a backup, each with why: not restored.
        package var itemsNeverBackedUp: [String] = []
        /// Rows of `Manifest.db` whose record does not decode, by name.
        package var unreadableRecords: [String] = []
    }

    /// Reads every byte the keybag opens. A file that does not decrypt fails the whole check
    /// (`PhoneBackupError.malformed` names it); items are counted by what became of them.
    package func verify(progress: (_ done: Int, _ total: Int) throws -> Void = { _, _ in }) throws -> Verification {
        var result = Verification()
        result.unreadableRecords = unreadableRecords
        let files = rows.filter { $0.flags == ManifestRow.regularFile }
        for (index, row) in files.enumerated() {
            let contents = try contents(of: row)
            result.files += 1
            result.bytes += contents.count
            if Int64(contents.count) != row.file.size { result.sizeMismatches.append("\(row.domain)-\(row.relativePath)") }
            try progress(index + 1, files.count)
        }
        for entry in try keychain() {
            result.keychainItems += 1
            switch entry {
            case .item: result.itemsOpened += 1
            case .neverBackedUp(_, let why):
                result.itemsOpened += 1
                result.itemsNeverBackedUp.append(why)
            case .tombstone: break
            case .sealed(_, _, _, .sealedToSourceDevice): result.itemsSealedToSourceDevice += 1
            case .sealed(_, _, _, .damaged): result.itemsDamaged += 1
            case .sealed(_, _, _, .unsupported): result.itemsUnsupported += 1
            }
        }
        return result
    }
}
