import AppleFormats
import Foundation
import KeychainModel
import KeychainStore

/// `Manifest.plist`: what a backup is before its password opens anything (`IOS-BACKUP.md`,
/// section 2), and the `Info.plist` and `Status.plist` written beside it (section 8).
struct PhoneManifest: Sendable {
    var encrypted: Bool
    var keybag: BackupKeybag
    /// nil in an unencrypted backup, whose `Manifest.db` is in plain.
    var manifestKey: ClassWrappedKey?
    var udid: String
    var deviceName: String
    var productVersion: String
    var applications: [PhoneApp]
    var date: Date?
    var wasPasscodeSet: Bool
    /// What a Keyferry device left out, by `CLASS.PROTECTION` (Keyferry's own key; phones write
    /// none, so a phone's backup counts nothing here).
    var leftOut: [String: Int]

    /// One entry of `Applications`. Keyferry adds the team and entitlement an app needs to be
    /// installed again; a phone's entry has neither, and they are worked out at restore.
    struct PhoneApp: Sendable {
        var bundleID: String
        var teamID: String?
        var accessGroups: [String]
        var hasKeychainEntitlement: Bool
    }

    static let keyferryTeam = "KeyferryTeamIdentifier"
    static let keyferryGroups = "KeyferryKeychainAccessGroups"
    static let keyferryEntitled = "KeyferryHasKeychainEntitlement"
    static let keyferryLeftOut = "KeyferryLeftOut"

    init(
        encrypted: Bool, keybag: BackupKeybag, manifestKey: ClassWrappedKey?, udid: String, deviceName: String, applications: [AppManifest], date: Date,
        wasPasscodeSet: Bool, leftOut: [String: Int]
    ) {
        self.encrypted = encrypted
        self.keybag = keybag
        self.manifestKey = manifestKey
        self.udid = udid
        self.deviceName = deviceName
        productVersion = PhoneIdentity.productVersion
        self.applications = applications.map {
            PhoneApp(bundleID: $0.bundleID, teamID: $0.teamID, accessGroups: $0.accessGroups, hasKeychainEntitlement: $0.hasKeychainEntitlement)
        }
        self.date = date
        self.wasPasscodeSet = wasPasscodeSet
        self.leftOut = leftOut
    }

    // MARK: Writing

    /// `Manifest.plist`, `Info.plist` and `Status.plist` into `folder`.
    func write(to folder: PhoneBackupFolder) throws {
        let lockdown: [String: PropertyList] = [
            "BuildVersion": .string(PhoneIdentity.buildVersion), "DeviceClass": .string("iPhone"), "DeviceName": .string(deviceName),
            "ProductType": .string(PhoneIdentity.productType), "ProductVersion": .string(productVersion), "SerialNumber": .string(serialNumber),
            "UniqueDeviceID": .string(udid),
        ]
        var applicationEntries: [String: PropertyList] = [:]
        for app in applications {
            var entry: [String: PropertyList] = [
                "CFBundleIdentifier": .string(app.bundleID), "CFBundleVersion": .string("1.0"), "ContainerContentClass": .string("Data/Application"),
                Self.keyferryGroups: .array(app.accessGroups.map(PropertyList.string)), Self.keyferryEntitled: .boolean(app.hasKeychainEntitlement),
            ]
            if let team = app.teamID { entry[Self.keyferryTeam] = .string(team) }
            applicationEntries[app.bundleID] = .dictionary(entry)
        }
        var manifest: [String: PropertyList] = [
            "IsEncrypted": .boolean(encrypted), "BackupKeyBag": .data(keybag.tlv), "Lockdown": .dictionary(lockdown),
            "Applications": .dictionary(applicationEntries), "Date": .date(date ?? Date()), "Version": .string(PhoneIdentity.manifestVersion),
            "SystemDomainsVersion": .string("24.0"), "WasPasscodeSet": .boolean(wasPasscodeSet),
            Self.keyferryLeftOut: .dictionary(leftOut.mapValues { .integer(Int64($0)) }),
        ]
        if let manifestKey { manifest["ManifestKey"] = .data(Data(manifestKey.bytes)) }
        try BinaryPropertyList.encode(.dictionary(manifest)).write(to: folder.manifest)

        let info: [String: PropertyList] = [
            "Build Version": .string(PhoneIdentity.buildVersion), "Device Name": .string(deviceName), "Display Name": .string(deviceName),
            "GUID": .string(udid.prefix(32).uppercased()), "Installed Applications": .array(applications.map { .string($0.bundleID) }),
            "Last Backup Date": .date(date ?? Date()), "Product Name": .string("iPhone"), "Product Type": .string(PhoneIdentity.productType),
            "Product Version": .string(productVersion), "Serial Number": .string(serialNumber), "Target Identifier": .string(udid),
            "Target Type": .string("Device"), "Unique Identifier": .string(udid.uppercased()), "iTunes Version": .string("12.13"),
            "iTunes Files": .dictionary([:]), "iTunes Settings": .dictionary([:]), "Applications": .dictionary([:]),
        ]
        try XMLPropertyList.encode(.dictionary(info)).write(to: folder.info)

        let status: [String: PropertyList] = [
            "BackupState": .string("new"), "Date": .date(date ?? Date()), "IsFullBackup": .boolean(false), "SnapshotState": .string("finished"),
            "UUID": .string(UUID().uuidString), "Version": .string(PhoneIdentity.statusVersion),
        ]
        try BinaryPropertyList.encode(.dictionary(status)).write(to: folder.status)
    }

    /// A serial number for the device: twelve characters of its UDID, upper-case.
    private var serialNumber: String { String(udid.prefix(12)).uppercased() }

    // MARK: Reading

    /// The largest `Manifest.plist` read: a phone's is tens of kilobytes, a few hundred apps.
    static let maximumBytes = 16 << 20

    /// Reads `Manifest.plist` and checks `Status.plist` says the backup finished.
    init(folder: PhoneBackupFolder) throws {
        let manifest = try Self.plist(folder.manifest, "Manifest.plist", in: folder.root)
        guard let keybagData = manifest["BackupKeyBag"]?.data else {
            throw PhoneBackupError.malformed("Manifest.plist has no BackupKeyBag")
        }
        do {
            keybag = try BackupKeybag(tlv: keybagData)
        } catch {
            throw PhoneBackupError.malformed("\(error)")
        }
        encrypted = manifest["IsEncrypted"]?.boolean ?? false
        if let key = manifest["ManifestKey"]?.data {
            do {
                manifestKey = try ClassWrappedKey(bytes: key)
            } catch {
                throw PhoneBackupError.malformed("its ManifestKey: \(error)")
            }
        }
        let lockdown = manifest["Lockdown"]
        udid = lockdown?["UniqueDeviceID"]?.string ?? folder.root.lastPathComponent
        deviceName = lockdown?["DeviceName"]?.string ?? "iPhone"
        productVersion = lockdown?["ProductVersion"]?.string ?? "unknown"
        date = manifest["Date"]?.date
        wasPasscodeSet = manifest["WasPasscodeSet"]?.boolean ?? false
        applications = (manifest["Applications"]?.dictionary ?? [:]).keys.sorted().map { bundleID in
            let entry = manifest["Applications"]?[bundleID]
            return PhoneApp(
                bundleID: bundleID, teamID: entry?[Self.keyferryTeam]?.string,
                accessGroups: entry?[Self.keyferryGroups]?.array?.compactMap(\.string) ?? [],
                hasKeychainEntitlement: entry?[Self.keyferryEntitled]?.boolean ?? true)
        }
        leftOut = (manifest[Self.keyferryLeftOut]?.dictionary ?? [:]).compactMapValues { $0.integer.map(Int.init) }
        if FileManager.default.fileExists(atPath: folder.status.path) {
            let status = try Self.plist(folder.status, "Status.plist", in: folder.root)
            if let state = status["SnapshotState"]?.string, state != "finished" {
                throw PhoneBackupError.unsupported("its Status.plist says the backup is '\(state)', not finished: the phone was still writing it")
            }
        }
    }

    private static func plist(_ url: URL, _ name: String, in root: URL) throws -> PropertyList {
        let data = try PhoneBackupReader.contents(of: url, name, limit: maximumBytes, in: root)
        let value: PropertyList
        do {
            value = try BinaryPropertyList.decode(data)
        } catch {
            throw PhoneBackupError.malformed("\(name): \(error)")
        }
        guard value.dictionary != nil else { throw PhoneBackupError.malformed("\(name) is not a dictionary") }
        return value
    }
}
