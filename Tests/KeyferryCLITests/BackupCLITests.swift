import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferrySystem
import Node
import NodeControl
import Testing

/// `keyferry backup create|inspect|verify` against a running node.
@Suite("keyferry backup", .blocking)
struct BackupCLITests {
    @Test("create both kinds, inspect without the password, verify with it; the encrypted file holds no marker")
    func createInspectVerify() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let passwordFile = cli.root.appendingPathComponent("password")
        try "correct horse\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let encrypted = cli.root.appendingPathComponent("enc.kfbackup").path
        let plain = cli.root.appendingPathComponent("plain.kfbackup").path

        let manifest = try cli.ok(["backup", "create", dir, "--out", encrypted, "--encrypted", "--password-file", passwordFile.path, "--json"]).object()
        let counts = try #require(manifest["counts"] as? [String: Int])
        #expect(counts["notExported.genericPassword.whenPasscodeSetThisDeviceOnly"] == 1)
        #expect(counts["items.genericPassword.whenUnlocked"] == 1)
        let created = try cli.ok(["backup", "create", dir, "--out", plain, "--unencrypted"])
        #expect(created.stderr.contains("warning: app sandboxes are stored in plain"), "warnings go to stderr")
        #expect(created.text.hasPrefix("wrote ") && !created.text.contains("warning"), "results alone on stdout")

        let inspection = try cli.ok(["backup", "inspect", encrypted, "--json"]).object()
        #expect((inspection["header"] as? [String: Any])?["mode"] as? String == "encrypted")
        #expect(inspection["checksummed"] as? Bool == false)
        #expect(try cli.ok(["backup", "inspect", plain, "--json"]).object()["checksummed"] as? Bool == true)
        #expect(try cli.ok(["backup", "verify", encrypted, "--password-file", passwordFile.path]).text.contains("every byte authenticated"))
        let plainVerified = try cli.ok(["backup", "verify", plain]).text
        #expect(plainVerified.contains("every byte intact") && plainVerified.contains("damage, not forgery"))
        // The device that wrote it authenticates it (its node running), and no other device can.
        let byItsDevice = try cli.ok(["backup", "verify", plain, "--device", dir, "--json"]).object()
        #expect(byItsDevice["authenticity"] as? String == "device" && byItsDevice["authenticated"] as? Bool == true)
        #expect(try cli.ok(["backup", "verify", plain, "--device", dir]).text.contains("every byte authenticated by"))
        let other = cli.path("other")
        try cli.ok(["device", "init", other])
        let byAnother = try cli.run(["backup", "verify", plain, "--device", other])
        #expect(
            byAnother.status == 64 && byAnother.stderr.contains("only the device that wrote an unencrypted archive can authenticate it"), "\(byAnother.stderr)")
        let forEncrypted = try cli.run(["backup", "verify", encrypted, "--password-file", passwordFile.path, "--device", dir])
        #expect(forEncrypted.status == 64 && forEncrypted.stderr.contains("--device means nothing"), "\(forEncrypted.stderr)")
        // A password for an unencrypted archive is refused, not ignored: it may have replaced an encrypted one.
        let refused = try cli.run(["backup", "verify", plain, "--password-file", passwordFile.path])
        #expect(refused.status == 64 && refused.stderr.contains("is unencrypted, so --password-file means nothing"))
        let refusedRestore = try cli.run(["restore", plain, "--to", dir, "--passcode", "123456", "--password-file", passwordFile.path])
        #expect(refusedRestore.status == 64 && refusedRestore.stderr.contains("is unencrypted, so --password-file means nothing"), "\(refusedRestore.stderr)")
        // The same from the environment.
        let fromEnvironment = ["KEYFERRY_BACKUP_PASSWORD": "expected encrypted"]
        let refusedByEnvironment = try cli.run(["restore", plain, "--to", dir, "--passcode", "123456"], environment: fromEnvironment)
        #expect(
            refusedByEnvironment.status == 64 && refusedByEnvironment.stderr.contains("so KEYFERRY_BACKUP_PASSWORD means nothing for it")
                && refusedByEnvironment.stderr.contains("unset it"), "\(refusedByEnvironment.stderr)")
        #expect(try cli.run(["backup", "verify", plain], environment: fromEnvironment).status == 64)

        let bytes = try Data(contentsOf: URL(fileURLWithPath: encrypted))
        for marker in ["marker-secret", "marker-account", "marker-defaults"] {
            #expect(bytes.range(of: Data(marker.utf8)) == nil, "\(marker) is readable in the encrypted archive")
        }
        // The unencrypted archive shows the legacy UserDefaults secret, as an iOS one does, but no keychain secret.
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: plain))
        #expect(plainBytes.range(of: Data("marker-secret".utf8)) == nil)
    }

    @Test(
        "bad input: no password, a wrong one, an existing file, a locked device, a damaged or truncated archive (1), a file that is no archive (64); nothing written"
    )
    func badInput() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let archive = cli.root.appendingPathComponent("a.kfbackup").path
        let wrong = cli.root.appendingPathComponent("wrong")
        try "nope\n".write(to: wrong, atomically: true, encoding: .utf8)

        let noPassword = try cli.run(["backup", "create", dir, "--out", archive, "--encrypted"])
        #expect(noPassword.status == 64 && noPassword.stderr.contains("needs a password"))
        #expect(try cli.run(["backup", "create", dir, "--out", archive]).status == 64)
        #expect(!FileManager.default.fileExists(atPath: archive))

        try cli.ok(["backup", "create", dir, "--out", archive, "--encrypted"], environment: ["KEYFERRY_BACKUP_PASSWORD": "from env"])
        let wrongPassword = try cli.run(["backup", "verify", archive, "--password-file", wrong.path])
        #expect(wrongPassword.status == 4 && wrongPassword.stderr.contains("wrong password"))
        let before = try Data(contentsOf: URL(fileURLWithPath: archive))
        let exists = try cli.run(["backup", "create", dir, "--out", archive, "--unencrypted"])
        #expect(exists.status == 64 && exists.stderr.contains("already exists"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: archive)) == before)

        var flipped = before
        flipped[flipped.count - 200] ^= 0x01
        try flipped.write(to: URL(fileURLWithPath: archive))
        let damaged = try cli.run(["backup", "verify", archive], environment: ["KEYFERRY_BACKUP_PASSWORD": "from env"])
        #expect(damaged.status == 1 && damaged.stderr.contains("damaged"), "\(damaged.status): \(damaged.stderr)")
        let notArchive = cli.root.appendingPathComponent("notes.txt")
        try "not an archive\n".write(to: notArchive, atomically: true, encoding: .utf8)
        let foreign = try cli.run(["backup", "verify", notArchive.path])
        #expect(foreign.status == 64 && foreign.stderr.contains("not a Keyferry backup archive"), "a file that is no archive is the user's input")

        try before.prefix(before.count / 2).write(to: URL(fileURLWithPath: archive))
        let truncated = try cli.run(["backup", "verify", archive], environment: ["KEYFERRY_BACKUP_PASSWORD": "from env"])
        #expect(truncated.status == 1 && truncated.stderr.contains("truncated"), "damaged data is 1, not a usage mistake")

        let noDirectory = try cli.run(["backup", "create", dir, "--out", cli.root.appendingPathComponent("none/a.kfbackup").path, "--unencrypted"])
        #expect(noDirectory.status == 5 && noDirectory.stderr.contains("the directory") && noDirectory.stderr.contains("does not exist"))
        let noArchive = try cli.run(["backup", "inspect", cli.root.appendingPathComponent("none.kfbackup").path])
        #expect(noArchive.status == 5 && noArchive.stderr.contains("there is no file"))
        let directoryArchive = try cli.run(["backup", "verify", cli.root.path])
        #expect(directoryArchive.status == 64 && directoryArchive.stderr.contains("is a folder with no Manifest.plist"), "\(directoryArchive.stderr)")

        try cli.ok(["device", "lock", dir, "--now"])
        let other = cli.root.appendingPathComponent("b.kfbackup").path
        let locked = try cli.run(["backup", "create", dir, "--out", other, "--unencrypted"])
        #expect(locked.status == 6 && locked.stderr.contains("locked"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: cli.root.path).filter { $0.contains("b.kfbackup") }
        #expect(leftovers.isEmpty)
    }

    @Test("a powered-off device is backed up given its passcode, which counts when wrong; none given is refused; the device remembers the backup")
    func poweredOff() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        try cli.ok(["node", "stop", dir])
        let passcode = cli.root.appendingPathComponent("passcode").path
        let wrong = cli.root.appendingPathComponent("wrong").path
        try "123456\n".write(toFile: passcode, atomically: true, encoding: .utf8)
        try "000000\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        let archive = cli.root.appendingPathComponent("off.kfbackup").path

        let none = try cli.run(["backup", "create", dir, "--out", archive, "--unencrypted"])
        #expect(none.status == 4 && none.stderr.contains("powered off and has a passcode"), "\(none.stderr)")
        let refused = try cli.run(["backup", "create", dir, "--out", archive, "--unencrypted", "--passcode-file", wrong, "--json"])
        let kind = try refused.object()["kind"] as? String
        #expect(refused.status == 4 && kind == "authentication")
        #expect(!FileManager.default.fileExists(atPath: archive), "no archive after a wrong passcode")
        #expect(try cli.status(dir)["failedPasscodeAttempts"] as? Int == 1, "the wrong passcode counted on the device")

        let manifest = try cli.ok(["backup", "create", dir, "--out", archive, "--unencrypted", "--passcode-file", passcode, "--json"]).object()
        #expect((manifest["counts"] as? [String: Int])?["items.genericPassword.whenUnlocked"] == 1)
        #expect(try cli.status(dir)["poweredOn"] as? Bool == false, "left powered off")
        #expect(try cli.status(dir)["failedPasscodeAttempts"] as? Int == 0, "the right passcode cleared the count")
        // Written by the device itself: it authenticates the archive.
        let verified = try cli.ok(["backup", "verify", archive, "--device", dir, "--json"]).object()
        #expect(verified["authenticity"] as? String == "device", "\(verified)")
    }
}

/// `keyferry restore` onto the same and onto a new device.
@Suite("keyferry restore", .blocking)
struct RestoreCLITests {
    @Test("a new phone from an encrypted backup: migratable back, ThisDeviceOnly dropped with its reason; the same device gets all")
    func newPhone() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let password = cli.root.appendingPathComponent("password")
        try "correct horse\n".write(to: password, atomically: true, encoding: .utf8)
        let archive = cli.root.appendingPathComponent("enc.kfbackup").path
        try cli.ok(["backup", "create", dir, "--out", archive, "--encrypted", "--password-file", password.path])

        let newPhone = cli.path("new-phone")
        try cli.ok(["device", "init", newPhone, "--passcode", "2468"])
        let report = try cli.ok(["restore", archive, "--to", newPhone, "--passcode", "2468", "--password-file", password.path, "--json"]).object()
        #expect(report["sameDevice"] as? Bool == false)
        let items = try #require(report["items"] as? [[String: Any]])
        #expect(items.count == 2)
        let dropped = items.first { $0["restored"] as? Bool == false }
        #expect(dropped?["accessible"] as? String == "afterFirstUnlockThisDeviceOnly" && dropped?["reason"] as? String == "deviceBound")
        #expect(dropped?["class"] as? String == "genericPassword" && (dropped?["why"] as? String)?.contains("ThisDeviceOnly") == true)
        #expect((report["neverExported"] as? [String: Int])?["genericPassword.whenPasscodeSetThisDeviceOnly"] == 1)

        try cli.ok(["node", "start", newPhone])
        try cli.ok(["device", "unlock", newPhone, "--passcode", "2468"])
        let app = ["--app", "com.example.mail"]
        #expect(try cli.ok(["item", "get", newPhone] + app + ["--account", "marker-account-whenUnlocked"]).text == "marker-secret-whenUnlocked")
        let missing = try cli.run(["item", "get", newPhone] + app + ["--account", "marker-account-afterFirstUnlockThisDeviceOnly"])
        #expect(missing.status == 3 && missing.stderr.hasPrefix("errSecItemNotFound (-25300)"))
        #expect(try cli.ok(["app", "defaults", newPhone, "--app", "com.example.mail", "--get", "token"]).text.contains("marker-defaults"))

        // The running source is refused; powered off, the same device gets every exported item back.
        let running = try cli.run(["restore", archive, "--to", dir, "--passcode", "123456", "--password-file", password.path])
        #expect(running.status == 6 && running.stderr.contains("keyferry node stop"))
        try cli.ok(["node", "stop", dir])
        let same = try cli.ok(["restore", archive, "--to", dir, "--passcode", "123456", "--password-file", password.path]).text
        #expect(same.hasPrefix("restored 2 of 2 keychain items") && same.contains("the same device"))
    }

    @Test("an older genuine archive of the device says so on restore, with both dates; verify shows when an archive was made")
    func olderArchiveReported() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let older = cli.path("older.kfbackup")
        let newer = cli.path("newer.kfbackup")
        try cli.ok(["backup", "create", dir, "--out", older, "--unencrypted"])
        try cli.ok(["backup", "create", dir, "--out", newer, "--unencrypted"])
        let verified = try cli.ok(["backup", "verify", older, "--json"]).object()
        #expect((verified["created"] as? String)?.hasPrefix("20") == true, "\(verified)")
        #expect(try cli.ok(["backup", "verify", older]).text.contains("made 20"))
        try cli.ok(["node", "stop", dir])
        let fresh = try cli.ok(["restore", newer, "--to", dir, "--passcode", "123456"]).text
        #expect(fresh.contains("archive made") && !fresh.contains("older than this device's last backup"), "\(fresh)")
        let stale = try cli.ok(["restore", older, "--to", dir, "--passcode", "123456", "--json"]).object()
        #expect(stale["newerBackupOnDevice"] != nil && stale["archiveCreated"] != nil, "\(stale)")
        #expect(try cli.ok(["restore", older, "--to", dir, "--passcode", "123456"]).text.contains("older than this device's last backup"))
    }

    @Test("everything keyferry writes is its owner's alone: devices, their keychains and sandboxes, archives, a restored device")
    func ownerOnly() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let archive = cli.path("plain.kfbackup")
        try cli.ok(["backup", "create", dir, "--out", archive, "--unencrypted"])
        let newPhone = cli.path("new-phone")
        try cli.ok(["device", "init", newPhone, "--passcode", "2468"])
        try cli.ok(["restore", archive, "--to", newPhone, "--passcode", "2468", "--accept-unauthenticated"])
        var checked = 0
        for top in [dir, archive, newPhone] {
            let paths = [top] + (FileManager.default.subpaths(atPath: top) ?? []).map { top + "/" + $0 }
            for path in paths {
                let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
                #expect(mode & 0o077 == 0, "\(path) is \(String(mode, radix: 8))")
                checked += 1
            }
        }
        #expect(checked > 10)
    }

    @Test("an unencrypted backup on a new device: no keychain item survives, the sandbox does; bad input changes nothing")
    func unencryptedElsewhere() throws {
        let cli = try CLI()
        let dir = try cli.backupSource()
        let archive = cli.root.appendingPathComponent("plain.kfbackup").path
        try cli.ok(["backup", "create", dir, "--out", archive, "--unencrypted"])
        let newPhone = cli.path("new-phone")
        try cli.ok(["device", "init", newPhone, "--passcode", "2468"])

        // Nothing proves who wrote another device's unencrypted archive: refused unless accepted.
        let refused = try cli.run(["restore", archive, "--to", newPhone, "--passcode", "2468"])
        #expect(refused.status == 64 && refused.stderr.contains("--accept-unauthenticated"), "\(refused.stderr)")
        let wrongPasscode = try cli.run(["restore", archive, "--to", newPhone, "--passcode", "0000", "--accept-unauthenticated"])
        // After the warning that --passcode is visible to every user of the machine.
        #expect(wrongPasscode.status == 4 && wrongPasscode.stderr.contains("\nerrSecAuthFailed (-25293)"), "\(wrongPasscode.stderr)")
        let notADevice = try cli.run(["restore", archive, "--to", cli.path("nowhere")])
        #expect(notADevice.status == 5 && notADevice.stderr.contains("not a Keyferry device"))
        #expect(!FileManager.default.fileExists(atPath: cli.path("nowhere")))

        let report = try cli.ok(["restore", archive, "--to", newPhone, "--passcode", "2468", "--accept-unauthenticated", "--json"]).object()
        let items = try #require(report["items"] as? [[String: Any]])
        #expect(items.allSatisfy { $0["restored"] as? Bool == false })
        #expect(items.contains { $0["reason"] as? String == "unencryptedOnAnotherDevice" })
        #expect(report["sandboxFiles"] as? Int == 1)
        #expect(report["authenticity"] as? String == "checksums")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: cli.root.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}

extension CLI {
    /// A running, unlocked phone with a migratable, a ThisDeviceOnly and a never-exported item,
    /// and a UserDefaults entry.
    func backupSource() throws -> String {
        let dir = try poweredDevice("phone")
        for protection in ["whenUnlocked", "afterFirstUnlockThisDeviceOnly", "whenPasscodeSetThisDeviceOnly"] {
            try ok([
                "item", "add", dir, "--app", "com.example.mail", "--account", "marker-account-\(protection)",
                "--value", "marker-secret-\(protection)", "--accessible", protection,
            ])
        }
        try ok(["app", "defaults", dir, "--app", "com.example.mail", "--set", "token=marker-defaults"])
        return dir
    }

}

extension CLI {
    /// A running, unlocked phone holding `count` items of the mail app, written in bulk while
    /// the device was powered off (thousands of calls would take longer than the test).
    func bulkSource(items count: Int) throws -> String {
        let dir = try poweredDevice("phone")
        try ok(["node", "stop", dir])
        let device = try Device.powerOn(at: URL(fileURLWithPath: dir))
        try device.unlock(passcode: "123456")
        try device.keychain(for: "com.example.mail").importItems(
            (0..<count).map {
                NewItem(.genericPassword, attributes: [.account: .string("bulk-\($0)")], data: Data(repeating: 7, count: 256))
            })
        device.powerOff()
        try ok(["node", "start", dir])
        try ok(["device", "unlock", dir, "--passcode", "123456"])
        return dir
    }

    /// Names in the test's root that start with `prefix`: what a backup or restore builds aside.
    func entries(startingWith prefix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root.path).filter { $0.hasPrefix(prefix) }
    }

    /// Starts `keyferry ARGUMENTS`, waits until an entry starting with `prefix` appears in the
    /// root (the work is under way), signals it and returns its exit status and stderr. With
    /// `frozen`, that process (the node doing the work) is stopped from then until the command
    /// says it was interrupted, so the work cannot finish before the signal has been acted on.
    func signal(_ signal: ProcessControl.Signal, _ arguments: [String], once prefix: String, frozen: Int32? = nil) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["XDG_STATE_HOME": stateHome.path]) { $1 }
        let err = Pipe()
        defer { err.closeBothEnds() }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while try entries(startingWith: prefix).isEmpty, process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        if let frozen { ProcessControl.send(.stop, to: frozen) }
        ProcessControl.send(signal, to: process.processIdentifier)
        var stderr = Data()
        if let frozen {
            while !String(decoding: stderr, as: UTF8.self).contains("interrupted") {
                let chunk = err.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                stderr += chunk
            }
            ProcessControl.send(.resume, to: frozen)
        }
        stderr += err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr, as: UTF8.self))
    }
}

/// Stopping a restore or a backup at any moment leaves the target either as it was or fully
/// restored, and no archive or half of one.
@Suite("keyferry restore and backup, stopped", .blocking)
struct RestoreKillTests {
    @Test("Ctrl-C during backup create or restore: exit 130, no archive, the target as it was, nothing left beside")
    func interrupted() throws {
        let cli = try CLI()
        let source = try cli.bulkSource(items: 20_000)
        let archive = cli.root.appendingPathComponent("big.kfbackup").path

        let node = try #require(try cli.ok(["node", "status", source, "--json"]).object()["pid"] as? Int)
        let backup = try cli.signal(
            .interrupt, ["backup", "create", source, "--out", archive, "--unencrypted"], once: ".big.kfbackup.partial-",
            frozen: Int32(node))
        #expect(backup.status == 130, "\(backup.stderr)")
        #expect(backup.stderr.contains("interrupted: no archive was written"), "\(backup.stderr)")
        #expect(try cli.entries(startingWith: ".big.kfbackup").isEmpty && cli.entries(startingWith: "big.kfbackup").isEmpty)

        try cli.ok(["backup", "create", source, "--out", archive, "--unencrypted"])
        try cli.ok(["item", "add", source, "--app", "com.example.mail", "--account", "after-backup", "--value", "x"])
        try cli.ok(["node", "stop", source])
        let restore = try cli.signal(.interrupt, ["restore", archive, "--to", source, "--passcode", "123456"], once: ".phone.restoring-")
        #expect(restore.status == 130, "\(restore.stderr)")
        #expect(restore.stderr.contains("interrupted: nothing was restored; \(source) is as it was"), "\(restore.stderr)")
        #expect(try cli.entries(startingWith: ".phone.").isEmpty)
        #expect(try cli.status(source)["itemCount"] as? Int == 20_001)
    }

    @Test("Ctrl-C while an iOS backup is written or restored: exit 130, no folder and nothing beside it, the target as it was")
    func interruptedPhoneBackup() throws {
        let cli = try CLI()
        let source = try cli.bulkSource(items: 20_000)
        let folder = cli.root.appendingPathComponent("ios").path
        let node = try #require(try cli.ok(["node", "status", source, "--json"]).object()["pid"] as? Int)
        let backup = try cli.signal(
            .interrupt, ["backup", "create", source, "--out", folder, "--format", "ios", "--unencrypted"], once: ".ios.writing-", frozen: Int32(node))
        #expect(backup.status == 130, "\(backup.stderr)")
        #expect(backup.stderr.contains("interrupted: no backup was written"), "\(backup.stderr)")
        #expect(try cli.entries(startingWith: ".ios").isEmpty && cli.entries(startingWith: "ios").isEmpty)

        try cli.ok(["backup", "create", source, "--out", folder, "--format", "ios", "--unencrypted"])
        try cli.ok(["item", "add", source, "--app", "com.example.mail", "--account", "after-backup", "--value", "x"])
        try cli.ok(["node", "stop", source])
        let restore = try cli.signal(
            .interrupt, ["restore", folder, "--to", source, "--passcode", "123456", "--accept-unauthenticated"], once: ".phone.restoring-")
        #expect(restore.status == 130, "\(restore.stderr)")
        #expect(restore.stderr.contains("interrupted: nothing was restored; \(source) is as it was"), "\(restore.stderr)")
        #expect(try cli.entries(startingWith: ".phone.").isEmpty)
        #expect(try cli.status(source)["itemCount"] as? Int == 20_001)
    }

    @Test("SIGKILL during restore: the target opens, holding its old items or all the restored ones, never a mix")
    func killed() throws {
        let cli = try CLI()
        let source = try cli.bulkSource(items: 1500)
        let archive = cli.root.appendingPathComponent("big.kfbackup").path
        try cli.ok(["backup", "create", source, "--out", archive, "--unencrypted"])
        try cli.ok(["node", "stop", source])

        try killRestores(cli, archive: archive, target: source)
        // Whatever happened, a full restore afterwards succeeds and leaves nothing beside the device.
        try cli.ok(["restore", archive, "--to", source, "--passcode", "123456"])
        #expect(try cli.status(source)["itemCount"] as? Int == 1500)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: cli.root.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    /// Kills restores at growing delays, checking after each that the target is whole and that
    /// looking at it cleared what the killed restore was building.
    func killRestores(_ cli: CLI, archive: String, target source: String) throws {
        func itemCount() throws -> Int? { try cli.status(source)["itemCount"] as? Int }
        #expect(try itemCount() == 1500)
        // Make the target differ from the archive, so a mix would show: one extra local item.
        try cli.ok(["node", "start", source])
        try cli.ok(["device", "unlock", source, "--passcode", "123456"])
        try cli.ok(["item", "add", source, "--app", "com.example.mail", "--account", "after-backup", "--value", "x"])
        try cli.ok(["node", "stop", source])

        for delay in [30, 120, 250, 400, 700, 1200] {
            let restore = Process()
            restore.executableURL = cli.binary
            restore.arguments = ["restore", archive, "--to", source, "--passcode", "123456"]
            restore.standardOutput = FileHandle.nullDevice
            restore.standardError = FileHandle.nullDevice
            try restore.run()
            Thread.sleep(forTimeInterval: Double(delay) / 1000)
            ProcessControl.send(.kill, to: restore.processIdentifier)
            restore.waitUntilExit()
            let count = try #require(try itemCount())
            #expect(count == 1501 || count == 1500, "after a kill at \(delay) ms the device holds \(count) items")
            #expect(try cli.entries(startingWith: ".phone.").isEmpty, "after a kill at \(delay) ms")
            if count == 1500 { break }
        }
    }
}
