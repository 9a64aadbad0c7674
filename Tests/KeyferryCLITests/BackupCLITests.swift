import Foundation
import Testing

/// `keyferry backup create|inspect|verify` against a running node.
@Suite("keyferry backup")
struct BackupCLITests {
    /// A running, unlocked phone with a migratable, a ThisDeviceOnly and a never-exported item,
    /// and a UserDefaults entry.
    func phone(_ cli: CLI) throws -> String {
        let dir = try cli.poweredDevice("phone")
        for protection in ["whenUnlocked", "afterFirstUnlockThisDeviceOnly", "whenPasscodeSetThisDeviceOnly"] {
            try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "marker-account-\(protection)",
                        "--value", "marker-secret-\(protection)", "--accessible", protection])
        }
        try cli.ok(["app", "defaults", dir, "--bundle", "com.example.mail", "--set", "token=marker-defaults"])
        return dir
    }

    @Test("create both kinds, inspect without the password, verify with it; the encrypted file holds no marker")
    func createInspectVerify() throws {
        let cli = try CLI()
        let dir = try phone(cli)
        let passwordFile = cli.root.appendingPathComponent("password")
        try "correct horse\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let encrypted = cli.root.appendingPathComponent("enc.kfbackup").path
        let plain = cli.root.appendingPathComponent("plain.kfbackup").path

        let manifest = try cli.ok(["backup", "create", dir, "--out", encrypted, "--encrypted", "--password-file", passwordFile.path, "--json"]).object()
        let counts = try #require(manifest["counts"] as? [String: Int])
        #expect(counts["notExported.genericPassword.whenPasscodeSetThisDeviceOnly"] == 1)
        #expect(counts["items.genericPassword.whenUnlocked"] == 1)
        let created = try cli.ok(["backup", "create", dir, "--out", plain, "--unencrypted"]).text
        #expect(created.contains("warning: app sandboxes are stored in plain"))

        let inspection = try cli.ok(["backup", "inspect", encrypted, "--json"]).object()
        #expect((inspection["header"] as? [String: Any])?["mode"] as? String == "encrypted")
        #expect(inspection["authenticated"] as? Bool == false)
        #expect(try cli.ok(["backup", "inspect", plain, "--json"]).object()["authenticated"] as? Bool == true)
        #expect(try cli.ok(["backup", "verify", encrypted, "--password-file", passwordFile.path]).text.contains("every byte authenticated"))
        #expect(try cli.ok(["backup", "verify", plain]).text.contains("every byte authenticated"))

        let bytes = try Data(contentsOf: URL(fileURLWithPath: encrypted))
        for marker in ["marker-secret", "marker-account", "marker-defaults"] {
            #expect(bytes.range(of: Data(marker.utf8)) == nil, "\(marker) is readable in the encrypted archive")
        }
        // The unencrypted archive shows the legacy UserDefaults secret, as an iOS one does, but no keychain secret.
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: plain))
        #expect(plainBytes.range(of: Data("marker-secret".utf8)) == nil)
    }

    @Test("bad input: no password, a wrong one, an existing file, a locked device, a truncated archive; nothing written")
    func badInput() throws {
        let cli = try CLI()
        let dir = try phone(cli)
        let archive = cli.root.appendingPathComponent("a.kfbackup").path
        let wrong = cli.root.appendingPathComponent("wrong")
        try "nope\n".write(to: wrong, atomically: true, encoding: .utf8)

        let noPassword = try cli.run(["backup", "create", dir, "--out", archive, "--encrypted"])
        #expect(noPassword.status == 1 && noPassword.stderr.contains("needs a password"))
        #expect(try cli.run(["backup", "create", dir, "--out", archive]).status == 64)
        #expect(!FileManager.default.fileExists(atPath: archive))

        try cli.ok(["backup", "create", dir, "--out", archive, "--encrypted"], environment: ["KEYFERRY_BACKUP_PASSWORD": "from env"])
        let wrongPassword = try cli.run(["backup", "verify", archive, "--password-file", wrong.path])
        #expect(wrongPassword.status == 1 && wrongPassword.stderr.contains("wrong password"))
        let before = try Data(contentsOf: URL(fileURLWithPath: archive))
        let exists = try cli.run(["backup", "create", dir, "--out", archive, "--unencrypted"])
        #expect(exists.status == 1 && exists.stderr.contains("already exists"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: archive)) == before)

        try before.prefix(before.count / 2).write(to: URL(fileURLWithPath: archive))
        let truncated = try cli.run(["backup", "verify", archive], environment: ["KEYFERRY_BACKUP_PASSWORD": "from env"])
        #expect(truncated.status == 1 && truncated.stderr.contains("truncated"))

        try cli.ok(["device", "lock", dir, "--now"])
        let other = cli.root.appendingPathComponent("b.kfbackup").path
        let locked = try cli.run(["backup", "create", dir, "--out", other, "--unencrypted"])
        #expect(locked.status == 1 && locked.stderr.contains("locked"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: cli.root.path).filter { $0.contains("b.kfbackup") }
        #expect(leftovers.isEmpty)
    }
}
