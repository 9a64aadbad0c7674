import AppleFormats
import Foundation
import Testing

@testable import PhoneBackup

/// Files from real iPhones' and iPads' backups, read where the project's shared folder keeps
/// them (`../shared/fixtures/real-ios-backups`, each folder with its SOURCE.txt); they are
/// never copied into the repository. A clone without that folder skips these tests.
@Suite("Real phones' backups", .enabled(if: RealBackups.available, "needs ../shared/fixtures/real-ios-backups beside the clone"))
struct RealBackupTests {
    @Test("iOS 10.2: the keybag opens with its password, every password-wrapped class key unwraps, a wrong one is refused")
    func iOS10_2() throws {
        let folder = RealBackups.folder("john-ios10.2-iphone7,2-test123")
        let reader = try PhoneBackupReader(folder: folder)
        #expect(reader.isEncrypted && reader.productVersion == "10.2" && reader.dataProtectionRounds == 10_000_000)
        let keybag = reader.manifest.keybag
        let key = try keybag.passwordKey(Data(try RealBackups.password(folder).utf8))
        let classKeys = try keybag.classKeys(with: key)
        // Classes 1-11; those tied to the phone (its ThisDeviceOnly classes) need its own key too.
        #expect(keybag.classes.count == 11)
        #expect(Set(classKeys.keys) == Set(keybag.classes.map(\.protectionClass)).subtracting(keybag.sealedToDevice))
        #expect(keybag.sealedToDevice.count == 4)
        #expect(throws: BackupKeybagError.wrongPassword) { try keybag.classKeys(with: try keybag.passwordKey(Data("test124".utf8))) }
        // The manifest key unwraps under its class key: only Manifest.db, not in the sample, is missing.
        let manifestKey = try #require(reader.manifest.manifestKey)
        _ = try manifestKey.unwrap(with: try #require(classKeys[manifestKey.protectionClass]))
        let survey = try PhoneBackupSurvey(folder: folder)
        #expect(survey.generation == .iOS10_2OrLater)
        #expect(survey.missing == ["Info.plist", "Status.plist", "Manifest.db"])
        #expect(survey.applications.count == 144)
        #expect(!survey.restorable)
    }

    @Test("iOS 9.3 and 9.3.5: named as backups of iOS before 10, their keybags (PBKDF2-SHA1 alone) open with their passwords")
    func iOS9() throws {
        for name in ["john-ios9.3-iphone7,2-test123", "john-ios9.3.5-ipad2,2-123456"] {
            let folder = RealBackups.folder(name)
            let survey = try PhoneBackupSurvey(folder: folder)
            #expect(survey.generation == .beforeiOS10, "\(name)")
            #expect(survey.dataProtectionRounds == 0 && survey.keybag?.rounds == 10_000, "\(name)")
            #expect(survey.productVersion?.hasPrefix("9.3") == true)
            let reader = try PhoneBackupReader(folder: folder)
            #expect(reader.weakPasswordWarning == nil, "no PBKDF2-SHA256 step to compare with a phone's")
            #expect {
                try reader.open(password: Data(try RealBackups.password(folder).utf8), device: nil)
            } throws: { error in
                guard case .unsupported(let why) = error as? PhoneBackupError else { return false }
                return why.contains("the password opens its keybag (7 class keys)") && why.contains("older than 10")
            }
            #expect(throws: PhoneBackupError.wrongPassword) { try reader.open(password: Data("wrong".utf8), device: nil) }
        }
    }

    @Test("iOS 14.3's Manifest.db is read whole: every row's record decodes; the folder is named a part of a backup")
    func manifestDatabase() throws {
        let folder = RealBackups.folder("mvt-ios14.3-unencrypted")
        let survey = try PhoneBackupSurvey(folder: folder)
        let files = try #require(survey.files)
        #expect(files.rows == 3_721)
        #expect(files.regularFiles == 1_089 && files.directories == 2_618 && files.symbolicLinks == 14)
        #expect(files.unreadable.isEmpty, "\(files.unreadable.prefix(5))")
        #expect(files.blobsPresent + files.blobsMissing == files.regularFiles)
        #expect(survey.encrypted == false)
        #expect(survey.productVersion == "14.3")
        #expect(survey.missing == ["Manifest.plist", "Status.plist"])
        #expect(!survey.restorable)
    }

    @Test("a real keychain-backup.plist: items per table, class and sealing version")
    func keychainPlist() throws {
        let survey = try PhoneBackupSurvey(folder: RealBackups.folder("otapki-keychain-backup-plist"))
        let keychain = try #require(survey.keychain)
        #expect(keychain.itemsPerTable == ["genp": 6, "keys": 5, "cert": 1])
        #expect(keychain.itemsPerClass == ["alwaysThisDeviceOnly (11)": 12])
        #expect(keychain.itemsPerVersion == ["3": 12])
        #expect(keychain.unreadableItems == 0)
    }
}

/// Where the real backups are, and their passwords (each folder's `password.txt`).
enum RealBackups {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/fixtures/real-ios-backups")

    static var available: Bool { FileManager.default.fileExists(atPath: root.appendingPathComponent("README.txt").path) }

    static func folder(_ name: String) -> URL { root.appendingPathComponent(name) }

    static func password(_ folder: URL) throws -> String {
        try String(contentsOf: folder.appendingPathComponent("password.txt"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
