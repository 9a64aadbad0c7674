import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import PhoneBackup

/// `backup inspect` and `backup verify` of an iOS backup folder, a phone's or a Keyferry device's.
enum PhoneBackupPresentation {
    /// Whether `path` names an iOS backup folder rather than a Keyferry archive. A folder that
    /// is neither is refused here, by what it lacks. `partial` takes any part of a phone's
    /// backup that `inspect` reads (a Manifest.db alone, an extracted keychain-backup.plist).
    static func isPhoneBackup(_ path: String, partial: Bool = false) throws -> Bool {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return false }
        guard PhoneBackupReader.isBackup(url) || (partial && PhoneBackupSurvey.isPartOfBackup(url)) else {
            throw CommandFailure(
                .invalidInput,
                "\(path) is a folder with no Manifest.plist: neither an iOS backup nor a Keyferry archive. Finder keeps each backup in a folder named by the phone's UDID (MobileSync/Backup/UDID); give that folder."
                    + (partial ? "" : " (`keyferry backup inspect` reads a part of one: a Manifest.db, or an extracted KeychainDomain/keychain-backup.plist.)"))
        }
        return true
    }

    /// What the folder holds, which needs no password: `Manifest.plist`, `Info.plist`, a plain
    /// `Manifest.db` and `keychain-backup.plist`, as far as they are there.
    static func inspect(_ path: String, json: Bool) throws {
        let survey = try PhoneBackupSurvey(folder: URL(fileURLWithPath: path))
        if json { return try printJSON(encodable: survey) }
        let kind = survey.encrypted.map { $0 ? "encrypted" : "unencrypted" } ?? "encryption unknown (no Manifest.plist)"
        print("\(path): iOS backup, \(kind)\(survey.generation.map { ", in the layout of \($0.rawValue)" } ?? "")")
        let device = [survey.deviceName, survey.productType].compactMap { $0?.escapingControlCharacters }.joined(separator: ", ")
        let identity = [survey.udid.map { "UDID \($0.escapingControlCharacters)" }, survey.productVersion.map { "iOS \($0.escapingControlCharacters)" }]
            .compactMap { $0 }.joined(separator: ", ")
        if !device.isEmpty || !identity.isEmpty { print("device   \(device.isEmpty ? "unnamed" : device)\(identity.isEmpty ? "" : " (\(identity))")") }
        if let created = survey.created { print("created  \(created.formatted(.iso8601))") }
        if let keybag = survey.keybag, let rounds = survey.dataProtectionRounds, survey.encrypted == true {
            let steps =
                rounds > 0
                ? "PBKDF2-SHA256, \(rounds.formatted()) rounds, then PBKDF2-SHA1, \(keybag.rounds.formatted())"
                : "PBKDF2-SHA1, \(keybag.rounds.formatted()) rounds (iOS before 10.2 has no PBKDF2-SHA256 step)"
            print("password \(steps); \(keybag.classKeys) class keys, \(keybag.sealedToDevice.count) of them tied to the phone")
            if rounds > 0, let weak = PhoneBackupReader.weakRoundsWarning(rounds) { print("  \(weak)") }
        }
        if !survey.applications.isEmpty || survey.present.contains("Manifest.plist") {
            let shown = survey.applications.prefix(Verbosity.current == .verbose ? .max : 12)
            let more = survey.applications.count - shown.count
            print(
                "apps     \(survey.applications.count): \(shown.joined(separator: ", ").escapingControlCharacters)"
                    + (more > 0 ? ", and \(more) more (--verbose or --json lists them)" : ""))
        }
        for (name, count) in survey.leftOut.sorted(by: { $0.key < $1.key }) {
            print("  left out: \(count) \(name.replacingOccurrences(of: ".", with: " ").escapingControlCharacters) (never in an iOS backup)")
        }
        if let files = survey.files {
            print(
                "files    Manifest.db: \(files.rows.formatted()) rows, \(files.regularFiles.formatted()) files, \(files.directories.formatted()) folders, "
                    + "\(files.symbolicLinks.formatted()) links in \(files.domains.formatted()) domains; \(files.blobsPresent.formatted()) blobs here, "
                    + "\(files.blobsMissing.formatted()) missing")
            if !files.unreadable.isEmpty {
                print("  \(files.unreadable.count.items(as: "row")) whose record does not decode:")
                for name in files.unreadable.prefix(20) { print("    \(name.escapingControlCharacters)") }
            }
        } else if survey.present.contains("Manifest.db") {
            print("files    Manifest.db is encrypted: `backup verify` reads it with the password")
        }
        if let keychain = survey.keychain {
            let tables = keychain.itemsPerTable.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            print("keychain keychain-backup.plist (\(keychain.source.escapingControlCharacters)): \(tables.isEmpty ? "no items" : tables)")
            let classes = keychain.itemsPerClass.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            if !classes.isEmpty { print("  by class: \(classes)") }
            let versions = keychain.itemsPerVersion.sorted { $0.key < $1.key }.map { "\($0.value) of version \($0.key)" }.joined(separator: ", ")
            if !versions.isEmpty { print("  sealing: \(versions)\(keychain.unreadableItems > 0 ? "; \(keychain.unreadableItems) unreadable" : "")") }
        }
        if !survey.missing.isEmpty { print("missing  \(survey.missing.joined(separator: ", ")): a part of a backup, not a whole one") }
        switch survey.generation {
        case .beforeiOS10?:
            print("(a backup of iOS before 10 keeps its file list in Manifest.mbdb, which Keyferry does not read: it cannot be restored)")
        case _ where survey.restorable:
            print("(as recorded; `keyferry backup verify \(path)\(survey.encrypted == true ? " --password-file F" : "")` reads every file and item)")
        default:
            print("(not restorable as it is: a restore needs \(PhoneBackupSurvey.wholeBackup.joined(separator: ", ")) and the blobs)")
        }
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
        // The password's key takes seconds at a phone's cost: said before it starts, as restore says it.
        let line = ProgressLine()
        if reader.isEncrypted { line.show("deriving the password's key (\(reader.dataProtectionRounds.formatted()) rounds of PBKDF2)") }
        let opened = try reader.open(password: secret.map { Data($0.utf8) }, device: keys)
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
        if !result.itemsNeverBackedUp.isEmpty {
            let whys = Dictionary(grouping: result.itemsNeverBackedUp, by: { $0 }).mapValues(\.count).sorted { $0.key < $1.key }
            print(
                "  \(result.itemsNeverBackedUp.count.items(as: "item")) of kinds a phone never backs up (not restored): "
                    + whys.map { "\($0.value) \($0.key.escapingControlCharacters)" }.joined(separator: "; "))
        }
        if result.itemsUnsupported > 0 { print("  \(result.itemsUnsupported.items(as: "item")) sealed in a form Keyferry does not read") }
        if !result.unreadableRecords.isEmpty {
            print("  \(result.unreadableRecords.count.items(as: "row")) of Manifest.db whose record does not decode (never restored):")
            for name in result.unreadableRecords.prefix(20) { print("    \(name.escapingControlCharacters)") }
        }
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
