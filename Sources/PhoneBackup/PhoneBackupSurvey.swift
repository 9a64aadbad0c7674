import AppleFormats
package import Foundation
import KeychainModel

/// What a folder of a phone's backup holds, read without a password and without stopping at
/// what is missing: `backup inspect`'s answer for a whole backup, or for the parts of one that
/// reach a user (a `Manifest.plist` alone, a `Manifest.db` without its blobs, an extracted
/// `KeychainDomain/keychain-backup.plist`). Everything it reads is bounded as a restore's
/// reads are; a file that is there but malformed is an error naming it.
package struct PhoneBackupSurvey: Encodable, Sendable {
    package var format = "ios"
    package var encrypted: Bool?
    package var deviceName: String?
    package var udid: String?
    package var productType: String?
    package var productVersion: String?
    package var created: Date?
    /// PBKDF2-SHA256 rounds of the password's key; 0 before iOS 10.2, whose keybag has none.
    package var dataProtectionRounds: UInt32?
    /// Which layout the backup has, by the iOS that wrote it.
    package var generation: Generation?
    package var keybag: Keybag?
    package var applications: [String] = []
    /// What a Keyferry device left out, by `CLASS.PROTECTION`.
    package var leftOut: [String: Int] = [:]
    /// The files of a whole backup that are here, and those that are not.
    package var present: [String] = []
    package var missing: [String] = []
    package var files: FileList?
    package var keychain: KeychainTables?
    /// Whether `restore` has what it needs (it still checks everything).
    package private(set) var restorable = false

    package enum Generation: String, Encodable, Sendable {
        /// `Manifest.db`, encrypted under `ManifestKey` when the backup is.
        case iOS10_2OrLater = "iOS 10.2 or later"
        /// `Manifest.db` in plain even in an encrypted backup; no `ManifestKey`.
        case iOS10_0Or10_1 = "iOS 10.0 or 10.1"
        /// `Manifest.mbdb`, which Keyferry does not read.
        case beforeiOS10 = "iOS 9 or earlier"
    }

    package struct Keybag: Encodable, Sendable {
        /// PBKDF2-SHA1 rounds, after `dataProtectionRounds` of PBKDF2-SHA256.
        package var rounds: UInt32
        package var classKeys: Int
        /// Classes only the phone that made the backup opens (ThisDeviceOnly).
        package var sealedToDevice: [UInt32]
    }

    /// `Manifest.db` in plain, read whole.
    package struct FileList: Encodable, Sendable {
        package var rows = 0
        package var regularFiles = 0
        package var directories = 0
        package var symbolicLinks = 0
        package var domains = 0
        package var blobsPresent = 0
        package var blobsMissing = 0
        /// Rows whose record does not decode, by name and why.
        package var unreadable: [String] = []
    }

    /// `keychain-backup.plist`, parsed; its items are sealed, so only their headers are read.
    package struct KeychainTables: Encodable, Sendable {
        /// Where it was found: the backup's blob, or an extracted `KeychainDomain` folder.
        package var source: String
        package var itemsPerTable: [String: Int] = [:]
        /// Items per keychain class, by Keyferry's name and Apple's number (`afterFirstUnlock (7)`).
        package var itemsPerClass: [String: Int] = [:]
        package var itemsPerVersion: [String: Int] = [:]
        /// Items whose sealing header does not read.
        package var unreadableItems = 0
    }

    /// The files a whole backup has beside its blobs.
    package static let wholeBackup = ["Info.plist", "Manifest.plist", "Status.plist", "Manifest.db"]
    static let extractedKeychain = "KeychainDomain/keychain-backup.plist"
    /// Every file `survey` reads, when it is there.
    static let parts = wholeBackup + ["Manifest.mbdb", extractedKeychain]

    /// Whether `url` is a folder holding any part of a phone's backup that `survey` reads.
    package static func isPartOfBackup(_ url: URL) -> Bool {
        PhoneBackupFolder.isBackupFolder(url)
            && parts.contains { FileManager.default.fileExists(atPath: url.appendingPathComponent($0).path) }
    }

    package init(folder url: URL) throws {
        guard PhoneBackupFolder.isBackupFolder(url) else { throw PhoneBackupError.malformed("\(url.path) is not a folder") }
        let folder = PhoneBackupFolder(root: url)
        func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path) }
        let mbdb = exists("Manifest.mbdb")
        present = Self.parts.filter(exists)
        missing = Self.wholeBackup.filter { !exists($0) && !($0 == "Manifest.db" && mbdb) }

        if exists("Manifest.plist") { try readManifest(folder, mbdb: mbdb) }
        if exists("Info.plist") { try readInfo(folder) }
        if exists("Manifest.db") { try readFileList(folder) }
        if generation == nil, mbdb { generation = .beforeiOS10 }
        if let keychainURL = keychainLocation(folder) {
            let data = try PhoneBackupReader.contents(of: keychainURL.url, "keychain-backup.plist", limit: PhoneBackupReader.maximumFileBytes, in: url)
            keychain = try Self.keychainTables(data, source: keychainURL.source)
        }
        restorable = missing.isEmpty && generation != .beforeiOS10
    }

    private mutating func readManifest(_ folder: PhoneBackupFolder, mbdb: Bool) throws {
        let manifest = try PhoneManifest(folder: folder)
        encrypted = manifest.encrypted
        deviceName = manifest.deviceName
        udid = manifest.udid
        productVersion = manifest.productVersion
        created = manifest.date
        applications = manifest.applications.map(\.bundleID)
        leftOut = manifest.leftOut
        dataProtectionRounds = manifest.keybag.dataProtectionIterations
        keybag = Keybag(
            rounds: manifest.keybag.iterations,
            classKeys: manifest.keybag.classes.count, sealedToDevice: manifest.keybag.sealedToDevice.sorted())
        // ManifestKey came with iOS 10.2; without it, the version tells 10.0 and 10.1 from 9.
        generation = mbdb ? .beforeiOS10 : manifest.manifestKey != nil ? .iOS10_2OrLater : Self.generation(of: manifest.productVersion)
    }

    /// `Info.plist`: iTunes writes it as XML, some tools as a binary plist. Read for the
    /// device when `Manifest.plist` is not there to say.
    private mutating func readInfo(_ folder: PhoneBackupFolder) throws {
        let data = try PhoneBackupReader.contents(of: folder.info, "Info.plist", limit: PhoneManifest.maximumBytes, in: folder.root)
        let info: [String: Any]
        if data.starts(with: Data("bplist".utf8)) {
            let value: PropertyList
            do {
                value = try BinaryPropertyList.decode(data)
            } catch {
                throw PhoneBackupError.malformed("Info.plist: \(error)")
            }
            info = (value.dictionary ?? [:]).compactMapValues { $0.string }
        } else {
            guard let plist = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any] else {
                throw PhoneBackupError.malformed("Info.plist is not a property list of a dictionary")
            }
            info = plist
        }
        deviceName = deviceName ?? info["Device Name"] as? String
        udid = udid ?? (info["Target Identifier"] as? String)
        productType = productType ?? info["Product Type"] as? String
        productVersion = productVersion ?? info["Product Version"] as? String
        if generation == nil, encrypted == nil, let version = productVersion {
            generation = Self.generation(of: version) == .beforeiOS10 ? .beforeiOS10 : .iOS10_2OrLater
        }
    }

    /// `Manifest.db`, when it is in plain: every row, and which of their blobs are here.
    private mutating func readFileList(_ folder: PhoneBackupFolder) throws {
        let data = try PhoneBackupReader.contents(of: folder.manifestDatabase, "Manifest.db", limit: PhoneBackupReader.maximumFileBytes, in: folder.root)
        guard data.starts(with: ManifestDatabase.sqliteHeader) else {
            // Sealed under ManifestKey: `verify` reads it with the password.
            if encrypted == nil { encrypted = true }
            return
        }
        if encrypted == nil { encrypted = false }
        let contents = try ManifestDatabase.read(data, maximumRows: PhoneBackupReader.maximumRows) {}
        var list = FileList(rows: contents.rows.count + contents.unreadable.count, unreadable: contents.unreadable)
        list.domains = Set(contents.rows.map(\.domain)).count
        for row in contents.rows {
            switch row.flags {
            case ManifestRow.regularFile:
                list.regularFiles += 1
                let blob = try? folder.blob(row.fileID)
                if let blob, FileManager.default.fileExists(atPath: blob.path) { list.blobsPresent += 1 } else { list.blobsMissing += 1 }
            case ManifestRow.directory: list.directories += 1
            case ManifestRow.symbolicLink: list.symbolicLinks += 1
            default: break
            }
        }
        files = list
    }

    /// `keychain-backup.plist`: the blob a plain `Manifest.db` names, else an extracted copy.
    private func keychainLocation(_ folder: PhoneBackupFolder) -> (url: URL, source: String)? {
        let id = BackupFileCrypto.fileID(domain: PhoneDomain.keychain, relativePath: PhoneDomain.keychainFile)
        if encrypted == false, let blob = try? folder.blob(id), FileManager.default.fileExists(atPath: blob.path) {
            return (blob, "the backup's blob \(id)")
        }
        let extracted = folder.root.appendingPathComponent(Self.extractedKeychain)
        return FileManager.default.fileExists(atPath: extracted.path) ? (extracted, Self.extractedKeychain) : nil
    }

    static func keychainTables(_ data: Data, source: String) throws -> KeychainTables {
        let plist: KeychainBackupPlist
        do {
            plist = try KeychainBackupPlist(propertyList: try BinaryPropertyList.decode(data))
        } catch {
            throw PhoneBackupError.malformed("keychain-backup.plist: \(error)")
        }
        var tables = KeychainTables(source: source)
        for (table, entries) in plist.entries {
            tables.itemsPerTable[table] = entries.count
            for entry in entries {
                if entry.data.count >= 4 {
                    let version = entry.data.prefix(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
                    tables.itemsPerVersion["\(version)", default: 0] += 1
                }
                guard let sealed = try? SealedKeychainItem(bytes: entry.data) else {
                    tables.unreadableItems += 1
                    continue
                }
                let name = PhoneClass.protection(keychainClass: sealed.protectionClass)?.name ?? "unknown class"
                tables.itemsPerClass["\(name) (\(sealed.protectionClass))", default: 0] += 1
            }
        }
        return tables
    }

    /// The layout a version of iOS writes, from `ProductVersion` ("9.3.5", "10.1", "17.0").
    static func generation(of productVersion: String) -> Generation {
        let parts = productVersion.split(separator: ".").map { Int($0) ?? 0 }
        let (major, minor) = (parts.first ?? 0, parts.count > 1 ? parts[1] : 0)
        return major < 10 ? .beforeiOS10 : major == 10 && minor < 2 ? .iOS10_0Or10_1 : .iOS10_2OrLater
    }
}
