import ArgumentParser
import Foundation
import KeychainStore
import PhoneBackup

/// `backup inspect` and `backup verify` of an iOS backup folder, a phone's or a Keyferry device's.
enum PhoneBackupPresentation {
    /// Whether `path` names an iOS backup folder rather than a Keyferry archive. A folder that
    /// is neither is refused here, by what it lacks.
    static func isPhoneBackup(_ path: String) throws -> Bool {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return false }
        guard PhoneBackupReader.isBackup(url) else {
            throw CommandFailure(
                .invalidInput,
                "\(path) is a folder with no Manifest.plist: neither an iOS backup nor a Keyferry archive. Finder keeps each backup in a folder named by the phone's UDID (MobileSync/Backup/UDID); give that folder."
            )
        }
        return true
    }

    /// What `Manifest.plist` says, which needs no password.
    struct Inspection: Encodable {
        var format = "ios"
        var encrypted: Bool
        var deviceName: String
        var udid: String
        var productVersion: String
        var created: String?
        var dataProtectionRounds: UInt32
        var applications: [String]
        var leftOut: [String: Int]
    }

    static func inspect(_ path: String, json: Bool) throws {
        let reader = try PhoneBackupReader(folder: URL(fileURLWithPath: path))
        let inspection = Inspection(
            encrypted: reader.isEncrypted, deviceName: reader.deviceName, udid: reader.udid, productVersion: reader.productVersion,
            created: reader.date?.formatted(.iso8601), dataProtectionRounds: reader.dataProtectionRounds, applications: reader.applications,
            leftOut: reader.leftOut)
        if json { return try printJSON(encodable: inspection) }
        print("\(path): iOS backup, \(reader.isEncrypted ? "encrypted" : "unencrypted")")
        print(
            "device   \(reader.deviceName.escapingControlCharacters) (UDID \(reader.udid.escapingControlCharacters), iOS \(reader.productVersion.escapingControlCharacters))"
        )
        if let created = inspection.created { print("created  \(created)") }
        if reader.isEncrypted { print("password PBKDF2-SHA256, \(reader.dataProtectionRounds.formatted()) rounds, then PBKDF2-SHA1") }
        if let weak = reader.weakPasswordWarning { print("  \(weak)") }
        print("apps     \(reader.applications.count): \(reader.applications.joined(separator: ", ").escapingControlCharacters)")
        for (name, count) in reader.leftOut.sorted(by: { $0.key < $1.key }) {
            print("  left out: \(count) \(name.replacingOccurrences(of: ".", with: " ").escapingControlCharacters) (never in an iOS backup)")
        }
        print("(Manifest.plist as recorded; `keyferry backup verify \(path)\(reader.isEncrypted ? " --password-file F" : "")` reads every file and item)")
    }

    static func verify(_ path: String, password: BackupPassword, device: String?, json: Bool) throws {
        let reader = try PhoneBackupReader(folder: URL(fileURLWithPath: path))
        try password.refuseForUnencrypted(encrypted: reader.isEncrypted, path)
        let secret = reader.isEncrypted ? try password.read(required: true) : nil
        let keys = try device.map { directory in
            let keys = try Device.backupKeys(at: URL(fileURLWithPath: directory))
            guard reader.wasWritten(by: keys.deviceID) else {
                throw CommandFailure(
                    .invalidInput,
                    "\(path) was written by \(reader.deviceName.escapingControlCharacters) (UDID \(reader.udid.escapingControlCharacters)), not by the device in \(directory); only the device that wrote a backup opens its ThisDeviceOnly items."
                )
            }
            return keys
        }
        let opened = try reader.open(password: secret.map { Data($0.utf8) }, device: keys)
        let line = ProgressLine()
        let result = try opened.verify { done, total in
            if done % 100 == 0 || done == total { line.show("reading \(done)/\(total) files") }
        }
        line.clear()
        if json { return try printJSON(encodable: result) }
        print(
            "\(path): \(result.files.items(as: "file")) (\(result.bytes.formatted()) bytes) decrypted and their padding checked; "
                + "\(result.itemsOpened) of \(result.keychainItems.items(as: "keychain item")) opened")
        if result.itemsSealedToSourceDevice > 0 {
            print("  \(result.itemsSealedToSourceDevice.items(as: "item")) sealed to the iPhone that made the backup (ThisDeviceOnly): not readable here")
        }
        if result.itemsDamaged > 0 { print("  \(result.itemsDamaged.items(as: "item")) do not open: damaged or altered") }
        if result.itemsUnsupported > 0 { print("  \(result.itemsUnsupported.items(as: "item")) sealed in a form Keyferry does not read") }
        for name in result.sizeMismatches.prefix(20) {
            print("  \(name.escapingControlCharacters): its recorded size differs from its contents (a phone records stale sizes for files in use)")
        }
        if let weak = reader.weakPasswordWarning { print("  \(weak)") }
        if reader.isEncrypted {
            print("(keychain items are authenticated; files carry no MAC in this format, only their padding is checked)")
        } else {
            print("(unencrypted: nothing in an iOS backup proves who wrote it)")
        }
    }
}
