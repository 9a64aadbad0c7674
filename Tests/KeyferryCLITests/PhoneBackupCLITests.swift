import Crypto
import Foundation
import KeychainTesting
import Testing

/// `keyferry backup create --format ios` checked by the tools people use on real iPhones'
/// backups (pinned in scripts/ios-readers), and such a backup restored onto a new device.
@Suite("keyferry and iOS backups, read by tools nobody here wrote", .blocking)
struct PhoneBackupCLITests {
    static let app = ["--app", "com.example.mail"]
    static let password = "correct horse battery"

    static func readers() throws -> URL { try OutsideReaders.directory() }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs `program` (a path) and returns its exit status, stdout and stderr. Its stderr goes
    /// to a file, so that however much it logs, reading stdout to its end cannot block it.
    static func run(_ program: URL, _ arguments: [String], in directory: URL) throws -> (status: Int32, stdout: Data, stderr: String) {
        let process = Process()
        process.executableURL = program
        process.arguments = arguments
        let errors = directory.appendingPathComponent("stderr-\(UUID().uuidString.prefix(8))")
        try Data().write(to: errors)
        let errorFile = try FileHandle(forWritingTo: errors)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = errorFile
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        out.closeBothEnds()
        try errorFile.close()
        return (process.terminationStatus, stdout, (try? String(contentsOf: errors, encoding: .utf8)) ?? "")
    }

    /// A phone with an item of every kind a backup treats differently, UserDefaults and files.
    static func phone(_ cli: CLI) throws -> String {
        let dir = try cli.poweredDevice("phone", extra: ["--biometry"])
        let add = ["item", "add", dir] + app
        try cli.ok(add + ["--account", "alice", "--service", "mail", "--value", "s3cret"])
        try cli.ok(add + ["--account", "synced", "--service", "chat", "--value", "sync-secret", "--sync", "--accessible", "afterFirstUnlock"])
        try cli.ok(add + ["--account", "daemon", "--service", "push", "--value", "always-secret", "--accessible", "always"])
        try cli.ok(
            add + ["--class", "internetPassword", "--account", "bob", "--server", "imap.example.com", "--port", "993", "--value", "imap-secret"])
        try cli.ok(add + ["--account", "bound", "--service", "mail", "--value", "bound-secret", "--accessible", "afterFirstUnlockThisDeviceOnly"])
        try cli.ok(add + ["--account", "pinned", "--service", "mail", "--value", "pinned-secret", "--accessible", "whenPasscodeSetThisDeviceOnly"])
        try cli.ok(add + ["--account", "face", "--service", "mail", "--value", "face-secret", "--access-control", "biometryAny"])
        try cli.ok(["app", "defaults", dir, "--app", "com.example.mail", "--set", "signedInUser=alice"])
        try cli.ok(["app", "file", dir, "--app", "com.example.mail", "--write", "notes/today.txt", "--text", "remember the milk"])
        let binary = cli.root.appendingPathComponent("vault.bin")
        try Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }).write(to: binary)
        try cli.ok(["app", "file", dir, "--app", "com.example.mail", "--write", "Vault.db", "--from", binary.path, "--protection", "complete"])
        // An app group's container: the AppDomainGroup domain of a real backup.
        try cli.ok(["app", "install", dir, "--app", "com.example.mail", "--team", "ABCDE12345", "--group", "group.com.example.mail"])
        let group = ["--app", "com.example.mail", "--app-group", "group.com.example.mail"]
        try cli.ok(["app", "defaults", dir] + group + ["--set", "widgetUser=alice"])
        try cli.ok(["app", "file", dir] + group + ["--write", "shared/state.json", "--text", "{\"unread\": 3}"])
        return dir
    }

    static func sha256(_ data: Data) -> String { SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined() }

    @Test(
        "iphone-backup-decrypt, pyiosbackup and iOSbackup read every file byte for byte; ios-backup-manager opens each migratable item and not the ThisDeviceOnly one; mvt decrypts and checks it"
    )
    func readersOpenIt() throws {
        let readers = try Self.readers()
        let cli = try CLI()
        let dir = try Self.phone(cli)
        let passwordFile = cli.root.appendingPathComponent("password")
        try "\(Self.password)\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let backups = cli.root.appendingPathComponent("backups")
        try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: true)
        // At a phone's cost: 10,000,000 rounds, the default.
        let written = try cli.ok([
            "backup", "create", dir, "--out", backups.appendingPathComponent("new").path, "--format", "ios", "--encrypted", "--password-file",
            passwordFile.path, "--json",
        ]).object()
        let udid = try #require(written["udid"] as? String)
        #expect(written["keychainItems"] as? Int == 5)
        #expect(written["leftOut"] as? [String: Int] == ["genericPassword.whenPasscodeSetThisDeviceOnly": 1, "genericPassword.accessControl": 1])
        // iOSbackup opens ROOT/UDID, as Finder keeps them.
        let folder = backups.appendingPathComponent(udid)
        try FileManager.default.moveItem(at: backups.appendingPathComponent("new"), to: folder)

        let read = try Self.run(
            readers.appendingPathComponent("tools/bin/python"),
            [Self.packageRoot.appendingPathComponent("Tests/KeyferryCLITests/IOSReaders/read_backup.py").path, backups.path, udid, Self.password],
            in: cli.root)
        try #require(read.status == 0, "the readers failed: \(read.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: read.stdout) as? [String: Any])

        // What the device holds, byte for byte.
        let sandbox = URL(fileURLWithPath: dir).appendingPathComponent("apps/com.example.mail")
        let expected: [String: String] = [
            "AppDomain-com.example.mail/Documents/notes/today.txt": Self.sha256(Data("remember the milk".utf8)),
            "AppDomain-com.example.mail/Documents/Vault.db": Self.sha256(try Data(contentsOf: cli.root.appendingPathComponent("vault.bin"))),
            "AppDomain-com.example.mail/Library/Preferences/com.example.mail.plist": Self.sha256(
                try Data(contentsOf: sandbox.appendingPathComponent("Library/Preferences/com.example.mail.plist"))),
            "AppDomainGroup-group.com.example.mail/shared/state.json": Self.sha256(Data("{\"unread\": 3}".utf8)),
            "AppDomainGroup-group.com.example.mail/Library/Preferences/group.com.example.mail.plist": Self.sha256(
                try Data(
                    contentsOf: URL(fileURLWithPath: dir).appendingPathComponent(
                        "groups/group.com.example.mail/Library/Preferences/group.com.example.mail.plist"))),
        ]
        for tool in ["iphone_backup_decrypt", "pyiosbackup", "iOSbackup"] {
            var files = try #require((report[tool] as? [String: Any])?["files"] as? [String: String], "\(tool)")
            #expect(files.removeValue(forKey: "KeychainDomain/keychain-backup.plist") != nil, "\(tool) lists the keychain")
            #expect(files == expected, "\(tool)")
        }
        #expect((report["iphone_backup_decrypt"] as? [String: Any])?["wrong_password_refused"] as? Bool == true)

        let items = try #require(report["keychain"] as? [[String: Any]])
        #expect(items.count == 5)
        func item(_ account: String) -> [String: Any]? { items.first { $0["acct"] as? String == account } }
        let group = "ABCDE12345.com.example.mail"
        for (account, service, pdmn, protectionClass, secret) in [
            ("alice", "mail", "ak", 6, "s3cret"), ("synced", "chat", "ck", 7, "sync-secret"), ("daemon", "push", "dk", 8, "always-secret"),
        ] {
            let found = try #require(item(account), "\(account) is decoded")
            #expect(found["status"] as? String == "decrypted")
            #expect(found["svce"] as? String == service)
            #expect(found["agrp"] as? String == group)
            #expect(found["pdmn"] as? String == pdmn)
            #expect(found["class"] as? Int == protectionClass)
            #expect(found["secret"] as? String == secret)
        }
        let bob = try #require(item("bob"))
        #expect(bob["table"] as? String == "inet" && bob["srvr"] as? String == "imap.example.com" && bob["secret"] as? String == "imap-secret")
        // The ThisDeviceOnly item is there, and nobody but the phone opens it.
        let sealed = items.filter { $0["status"] as? String != "decrypted" }
        #expect(sealed.count == 1)
        #expect(sealed.first?["class"] as? Int == 10 && sealed.first?["acct"] is NSNull)

        let mvt = readers.appendingPathComponent("mvt/bin/mvt-ios")
        let decrypted = cli.root.appendingPathComponent("mvt-decrypted")
        let decrypt = try Self.run(mvt, ["decrypt-backup", "-p", Self.password, "-d", decrypted.path, folder.path], in: cli.root)
        #expect(decrypt.status == 0, "\(decrypt.stderr)")
        let check = try Self.run(mvt, ["check-backup", "-o", cli.root.appendingPathComponent("mvt-results").path, decrypted.path], in: cli.root)
        #expect(check.status == 0, "\(check.stderr)")
    }

    @Test("restored onto a new device, it keeps exactly what the source's survival matrix says a new device keeps from an encrypted backup")
    func roundTrip() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        let passwordFile = cli.root.appendingPathComponent("password")
        try "\(Self.password)\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let folder = cli.root.appendingPathComponent("backup").path
        try cli.ok(["backup", "create", dir, "--out", folder, "--format", "ios", "--encrypted", "--password-file", passwordFile.path, "--rounds", "1000"])
        let matrix = try cli.ok(["survival", dir, "--json"]).object()

        let newPhone = cli.path("new")
        try cli.ok(["device", "init", newPhone, "--passcode", "654321"])
        let restored = try cli.ok(["restore", folder, "--to", newPhone, "--passcode", "654321", "--password-file", passwordFile.path, "--json"]).object()
        #expect(restored["format"] as? String == "ios")
        #expect(restored["neverExported"] as? [String: Int] == ["genericPassword.whenPasscodeSetThisDeviceOnly": 1, "genericPassword.accessControl": 1])
        try cli.ok(["node", "start", newPhone])
        try cli.ok(["device", "unlock", newPhone, "--passcode", "654321"])

        // Every row of the matrix, kept or lost on "encrypted backup, new device", is kept or
        // absent on the restored device.
        let listed = try cli.ok(["item", "list", newPhone, "--json"]).object()["items"] as? [[String: Any]] ?? []
        let names = Set(
            listed.map { item -> String in
                let attributes = item["attributes"] as? [String: Any] ?? [:]
                return "\(attributes["account"] as? String ?? "") @ \(attributes["service"] as? String ?? attributes["server"] as? String ?? "")"
            })
        let rows = try #require(matrix["rows"] as? [[String: Any]])
        #expect(rows.count == 12)
        let group = "group.com.example.mail"
        for row in rows {
            let name = try #require(row["name"] as? String)
            let cell = (row["cells"] as? [String: Any])?["encrypted-backup-new-device"] as? [String: Any]
            let kept = cell?["outcome"] as? String == "kept"
            // The app group's rows are read in its container, as the app reaches it.
            let inGroup = name.hasPrefix(group)
            let where_ = ["--app", "com.example.mail"] + (inGroup ? ["--app-group", group] : [])
            switch row["kind"] as? String {
            case "keychain":
                #expect(names.contains(name) == kept, "\(name): \(cell ?? [:])")
            case "userDefaults":
                let value = try cli.run(["app", "defaults", newPhone] + where_ + ["--get", inGroup ? "widgetUser" : "signedInUser"])
                #expect((value.text.trimmingCharacters(in: .newlines) == "alice") == kept, "\(name)")
            default:
                let path = String(name.dropFirst(inGroup ? group.count + 1 : "Documents/".count))
                let file = try cli.run(["app", "file", newPhone] + where_ + ["--read", path])
                #expect((file.status == 0) == kept, "\(name): \(file.stderr)")
            }
        }
        #expect(names == ["alice @ mail", "synced @ chat", "daemon @ push", "bob @ imap.example.com"])
        // The restored device is a device like any other: its own matrix runs.
        let again = try cli.ok(["survival", newPhone, "--json"]).object()
        #expect((again["rows"] as? [[String: Any]])?.count == 9)
    }

    /// The real phones' files of `../shared/fixtures/real-ios-backups`, never copied here.
    static let realBackupFolder = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/fixtures/real-ios-backups")

    @Test(
        "backup inspect of real phones' backups, whole or in part, says what each is and what it lacks",
        .enabled(if: FileManager.default.fileExists(atPath: realBackupFolder.path), "needs ../shared/fixtures/real-ios-backups beside the clone"))
    func realBackups() throws {
        let cli = try CLI()
        let expected: [(String, [String])] = [
            (
                "john-ios10.2-iphone7,2-test123",
                ["encrypted, in the layout of iOS 10.2 or later", "iOS 10.2", "10,000,000 rounds", "144", "missing  Info.plist, Status.plist, Manifest.db"]
            ),
            ("john-ios9.3-iphone7,2-test123", ["iOS 9 or earlier", "iOS 9.3", "PBKDF2-SHA1, 10,000 rounds", "Manifest.mbdb"]),
            ("john-ios9.3.5-ipad2,2-123456", ["iOS 9 or earlier", "iPad2", "iOS 9.3.5"]),
            (
                "mvt-ios14.3-unencrypted",
                ["unencrypted", "iOS 14.3", "3,721 rows, 1,089 files, 2,618 folders, 14 links", "missing  Manifest.plist, Status.plist"]
            ),
            ("otapki-keychain-backup-plist", ["1 cert, 6 genp, 5 keys", "12 alwaysThisDeviceOnly (11)", "12 of version 3"]),
        ]
        for (name, phrases) in expected {
            let folder = Self.realBackupFolder.appendingPathComponent(name).path
            let text = try cli.ok(["backup", "inspect", folder]).text
            for phrase in phrases { #expect(text.contains(phrase), "\(name): no '\(phrase)' in\n\(text)") }
            #expect(try cli.ok(["backup", "inspect", folder, "--json"]).object()["format"] as? String == "ios")
        }
        // The iOS 10.2 sample's password opens its keybag; with no Manifest.db, verify says so.
        let sample = Self.realBackupFolder.appendingPathComponent("john-ios10.2-iphone7,2-test123")
        let password = sample.appendingPathComponent("password.txt").path
        let verified = try cli.run(["backup", "verify", sample.path, "--password-file", password])
        #expect(
            verified.status == 64 && verified.stderr.contains("the password opens its keybag (7 class keys), but Manifest.db is missing"), "\(verified.stderr)")
        let wrong = cli.root.appendingPathComponent("wrong.txt")
        try Data("test124\n".utf8).write(to: wrong)
        let refused = try cli.run(["backup", "verify", sample.path, "--password-file", wrong.path])
        #expect(refused.status != 0 && refused.stderr.contains("wrong password"), "\(refused.stderr)")
    }

    @Test("an unencrypted iOS backup is restored only with --accept-unauthenticated; what a backup names never reaches the terminal raw")
    func unauthenticatedAndEscaped() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let hostile = "alice\u{1B}]0;pwned\u{07}\u{1B}[2K\r"
        try cli.ok(["item", "add", dir] + Self.app + ["--account", hostile, "--service", "mail", "--value", "s3cret"])
        let folder = cli.path("backup")
        try cli.ok(["backup", "create", dir, "--out", folder, "--format", "ios", "--unencrypted"])
        // A name the backup chose, where Keyferry's writer counts what it left out.
        let manifestURL = URL(fileURLWithPath: folder).appendingPathComponent("Manifest.plist")
        var manifest = try #require(
            try PropertyListSerialization.propertyList(from: try Data(contentsOf: manifestURL), format: nil) as? [String: Any])
        manifest["KeyferryLeftOut"] = ["genericPassword.\u{1B}]0;title\u{07}": 1]
        try PropertyListSerialization.data(fromPropertyList: manifest, format: .binary, options: 0).write(to: manifestURL)
        try cli.ok(["item", "add", dir] + Self.app + ["--account", "added-later", "--service", "mail", "--value", "gone"])
        try cli.ok(["node", "stop", dir])
        let store = URL(fileURLWithPath: dir).appendingPathComponent("keychain.db")
        let before = try Data(contentsOf: store)
        let refused = try cli.run(["restore", folder, "--to", dir, "--passcode", "123456"])
        #expect(refused.status == 64 && refused.stderr.contains("--accept-unauthenticated"), "\(refused.stderr)")
        #expect(try Data(contentsOf: store) == before)
        for flags in [[], ["--verbose"]] {
            let restored = try cli.ok(["restore", folder, "--to", dir, "--passcode", "123456", "--accept-unauthenticated"] + flags)
            #expect(!restored.text.contains("\u{1B}") && !restored.stderr.contains("\u{1B}"), "\(restored.text)")
            #expect(!restored.text.contains("\u{07}"), "\(restored.text)")
            #expect(restored.text.contains("not authenticated"))
        }
    }

    @Test("bad input: an existing folder, --rounds where it means nothing, a folder that is no backup, a wrong password; nothing written")
    func badInput() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir] + Self.app + ["--account", "alice", "--value", "s3cret"])
        let existing = cli.root.appendingPathComponent("existing")
        try FileManager.default.createDirectory(at: existing, withIntermediateDirectories: false)
        let onExisting = try cli.run(["backup", "create", dir, "--out", existing.path, "--format", "ios", "--unencrypted"])
        #expect(onExisting.status == 64 && onExisting.stderr.contains("already exists"), "\(onExisting.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing.path).isEmpty)
        let roundsForArchive = try cli.run(["backup", "create", dir, "--out", cli.path("a.kfb"), "--encrypted", "--rounds", "5"])
        #expect(roundsForArchive.status == 64 && roundsForArchive.stderr.contains("--rounds is for --format ios"))
        let tooMany = try cli.run(["backup", "create", dir, "--out", cli.path("b"), "--format", "ios", "--encrypted", "--rounds", "30000000"])
        #expect(tooMany.status == 64 && tooMany.stderr.contains("1 to 20,000,000"))

        for command in [["restore", existing.path, "--to", dir], ["backup", "inspect", existing.path], ["backup", "verify", existing.path]] {
            let result = try cli.run(command)
            #expect(result.status == 64 && result.stderr.contains("no Manifest.plist"), "\(command): \(result.stderr)")
        }

        // The password from standard input; a wrong one is refused before the target is touched.
        let folder = cli.path("backup")
        let weak = try cli.ok(
            ["backup", "create", dir, "--out", folder, "--format", "ios", "--encrypted", "--password-stdin", "--rounds", "1000"], stdin: Data("right\n".utf8))
        #expect(weak.stderr.contains("1,000 rounds of PBKDF2-SHA256") && weak.stderr.contains("times less"), "\(weak.stderr)")
        let target = cli.path("new")
        try cli.ok(["device", "init", target, "--passcode", "654321"])
        let store = URL(fileURLWithPath: target).appendingPathComponent("keychain.db")
        let before = try Data(contentsOf: store)
        let wrong = try cli.run(["restore", folder, "--to", target, "--passcode", "654321", "--password-stdin"], stdin: Data("wrong\n".utf8))
        #expect(wrong.status != 0 && wrong.stderr.contains("wrong password"), "\(wrong.stderr)")
        #expect(try Data(contentsOf: store) == before)
        let inspected = try cli.ok(["backup", "inspect", folder, "--json"]).object()
        #expect(inspected["format"] as? String == "ios" && inspected["dataProtectionRounds"] as? Int == 1000)
        #expect(
            try cli.ok(["restore", folder, "--to", target, "--passcode", "654321", "--password-stdin"], stdin: Data("right\n".utf8)).text.contains(
                "restored 1 of 1"))
    }
}
