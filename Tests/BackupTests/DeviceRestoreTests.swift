import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

@testable import Backup

@Suite("Restore")
struct DeviceRestoreTests {
    static let classes: [ProtectionClass] = DeviceBackupTests.classes
    let password = Data("backup password".utf8)

    /// A source device with one item per protection class and synchronizable or not
    /// (`acct-CLASS-sync|local`, secret the same with `secret-`), and a UserDefaults entry.
    func source(seed: UInt64 = 1) throws -> TestDevice {
        let fixture = try TestDevice(seed: seed)
        let keychain = try fixture.keychain()
        for protection in Self.classes {
            for sync in [false, true] {
                let name = "\(protection.name)-\(sync ? "sync" : "local")"
                try keychain.add(.password(account: "acct-\(name)", value: "secret-\(name)", protection: protection, synchronizable: sync))
            }
        }
        try keychain.add(.ellipticCurveKey(label: "enclave key", secureEnclave: true))
        try fixture.device.sandbox(for: TestDevice.appID).set("alice", forKey: "signedInUser")
        return fixture
    }

    func archive(_ fixture: TestDevice, encrypted: Bool) throws -> URL {
        let url = fixture.directory.deletingLastPathComponent().appendingPathComponent("backup-\(encrypted).kfbackup")
        try DeviceBackup.create(from: fixture.device, to: url, mode: encrypted ? .encrypted(password: password, parameters: .minimum) : .unencrypted)
        return url
    }

    /// Backs `fixture` up, then restores the archive onto the same device or onto a new one
    /// (returned too, since its directory lives as long as it does), both powered off first.
    func backUpAndRestore(_ fixture: TestDevice, encrypted: Bool, sameDevice: Bool) throws -> (report: RestoreReport, target: URL, newDevice: TestDevice) {
        let url = try archive(fixture, encrypted: encrypted)
        let newDevice = try TestDevice(seed: 7)
        let target = sameDevice ? fixture.directory : newDevice.directory
        fixture.device.powerOff()
        newDevice.device.powerOff()
        let report = try DeviceRestore.restore(
            url, password: encrypted ? password : nil, to: target, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: !encrypted)
        return (report, target, newDevice)
    }

    /// Accounts and secrets readable on the device in `directory`, after power-on and unlock.
    func contents(_ directory: URL, passcode: String? = TestDevice.defaultPasscode) throws -> [String: String] {
        let device = try Device.powerOn(at: directory)
        defer { device.powerOff() }
        if let passcode { try device.unlock(passcode: passcode) }
        var found: [String: String] = [:]
        for change in try device.deviceKeychain.changes(since: 0, includingData: true) where !change.isTombstone {
            if case .string(let account) = change.record.attributes[.account] {
                found[account] = String(decoding: change.record.data ?? Data(), as: UTF8.self)
            }
        }
        return found
    }

    /// What SEMANTICS.md says comes back: never akpu; on a new device, only migratable items
    /// from an encrypted archive.
    static func expected(_ protection: ProtectionClass, encrypted: Bool, sameDevice: Bool) -> Bool {
        if protection == .whenPasscodeSetThisDeviceOnly { return false }
        if sameDevice { return true }
        return encrypted && !protection.isThisDeviceOnly
    }

    @Test(
        "the matrix: 7 classes x synchronizable x {encrypted, unencrypted} x {same device, new device}",
        arguments: [(true, true), (true, false), (false, true), (false, false)])
    func matrix(encrypted: Bool, sameDevice: Bool) throws {
        let fixture = try source()
        let (report, target, newDevice) = try backUpAndRestore(fixture, encrypted: encrypted, sameDevice: sameDevice)
        defer { withExtendedLifetime(newDevice) {} }
        #expect(report.sameDevice == sameDevice)
        #expect(report.authenticity == (encrypted ? .password : sameDevice ? .device : .checksums))
        #expect(report.neverExported["genericPassword.whenPasscodeSetThisDeviceOnly"] == 2)
        #expect(report.neverExported["key.secureEnclave"] == 1, "in no archive, whatever the key's class")
        let found = try contents(target)
        for protection in Self.classes {
            for sync in [false, true] {
                let name = "\(protection.name)-\(sync ? "sync" : "local")"
                let comesBack = Self.expected(protection, encrypted: encrypted, sameDevice: sameDevice)
                // A synchronizable item already on the target merges instead of being replaced,
                // so the source's own never-exported synchronizable item stays where it was.
                let stays = sameDevice && sync && protection == .whenPasscodeSetThisDeviceOnly
                #expect((found["acct-\(name)"] == "secret-\(name)") == (comesBack || stays), "\(name)")
                let outcome = report.items.first { $0.protection == protection && $0.synchronizable == sync }
                if protection == .whenPasscodeSetThisDeviceOnly {
                    #expect(outcome == nil)
                } else {
                    #expect(outcome?.restored == comesBack, "\(name)")
                    if !comesBack {
                        #expect(outcome?.reason == (protection.isThisDeviceOnly ? .deviceBound : .unencryptedOnAnotherDevice), "\(name)")
                    }
                }
            }
        }
        // Sandboxes come back everywhere; the target keeps its own passcode.
        let restored = try Device.powerOn(at: target)
        defer { restored.powerOff() }
        try restored.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try restored.sandbox(for: TestDevice.appID).string(forKey: "signedInUser") == "alice")
    }

    @Test(
        "items of an app not installed on the target come back from every kind of archive, and are seen once the app is installed",
        arguments: [(true, true), (true, false), (false, true)])
    func itemsWithoutTheirApp(encrypted: Bool, sameDevice: Bool) throws {
        let fixture = try TestDevice()
        let mail = AppManifest(bundleID: "com.example.mail", teamID: TestDevice.teamID)
        try fixture.device.install(mail)
        try fixture.device.keychain(for: mail.bundleID).add(.password(account: "mail-token", value: "kept", protection: .afterFirstUnlock))
        // Uninstalled before the backup: its items stay in the keychain, its app leaves the archive.
        try fixture.device.uninstall(bundleID: mail.bundleID)
        let (report, target, newDevice) = try backUpAndRestore(fixture, encrypted: encrypted, sameDevice: sameDevice)
        defer { withExtendedLifetime(newDevice) {} }
        let outcome = try #require(report.items.first { $0.name?.hasPrefix("mail-token") == true })
        #expect(outcome.restored && outcome.waitingForApp && outcome.reason == nil)
        #expect(!report.apps.contains(mail.bundleID))
        let restored = try Device.powerOn(at: target)
        defer { restored.powerOff() }
        try restored.unlock(passcode: TestDevice.defaultPasscode)
        #expect(throws: DeviceError.self) { try restored.keychain(for: mail.bundleID) }
        try restored.install(mail)
        #expect(try restored.keychain(for: mail.bundleID).copy(.password(account: "mail-token")).first?.data == Data("kept".utf8))
    }

    @Test("the seed-001 scenario: on a new phone from an encrypted backup, every ThisDeviceOnly item is errSecItemNotFound, every migratable one readable")
    func seedScenario() throws {
        let fixture = try source()
        let url = try archive(fixture, encrypted: true)
        let phone = try TestDevice(seed: 11)
        phone.device.powerOff()
        _ = try DeviceRestore.restore(url, password: password, to: phone.directory, passcode: TestDevice.defaultPasscode)
        let device = try Device.powerOn(at: phone.directory)
        defer { device.powerOff() }
        try device.unlock(passcode: TestDevice.defaultPasscode)
        let keychain = try device.keychain(for: TestDevice.appID)
        for protection in Self.classes {
            let query = ItemQuery.password(account: "acct-\(protection.name)-local")
            if protection.isThisDeviceOnly {
                #expect(status { _ = try keychain.copy(query) } == .itemNotFound, "\(protection.name)")
            } else {
                #expect(try keychain.copy(query).first?.data == Data("secret-\(protection.name)-local".utf8))
            }
        }
    }

    @Test("merge: the target's local items are replaced, a newer synchronizable copy and a newer tombstone win")
    func merge() throws {
        let fixture = try source()
        let url = try archive(fixture, encrypted: true)
        fixture.clock.advance(by: 60)
        let keychain = try fixture.keychain()
        try keychain.add(.password(account: "made-after-backup", value: "x"))
        try keychain.update(.password(account: "acct-whenUnlocked-sync", synchronizable: .yes), with: ItemChanges(data: Data("newer".utf8)))
        try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("acct-afterFirstUnlock-sync")], synchronizable: .yes))
        fixture.device.powerOff()

        let report = try DeviceRestore.restore(url, password: password, to: fixture.directory, passcode: TestDevice.defaultPasscode)
        let found = try contents(fixture.directory)
        #expect(found["made-after-backup"] == nil)
        #expect(found["acct-whenUnlocked-sync"] == "newer")
        #expect(found["acct-afterFirstUnlock-sync"] == nil)
        #expect(found["acct-always-sync"] == "secret-always-sync")
        let reasons = Dictionary(
            report.items.compactMap { item in item.reason.map { ("\(item.protection.name)-\(item.synchronizable)", $0) } },
            uniquingKeysWith: { a, _ in a })
        #expect(reasons["whenUnlocked-true"] == .newerOnDevice)
        #expect(reasons["afterFirstUnlock-true"] == .newerTombstone)
    }

    @Test(
        "items whose access control asks for the user are in no backup, encrypted or not, onto the same device or a new one (SecServerCopyKeychainPlist skips them)",
        arguments: [true, false])
    func accessControlItemsStayBehind(encrypted: Bool) throws {
        for sameDevice in [true, false] {
            let fixture = try TestDevice(biometry: true)
            let keychain = try fixture.keychain()
            for (account, flags) in [("any-face", AccessControlFlags.biometryAny), ("this-face", .biometryCurrentSet), ("passcode", .devicePasscode)] {
                var item = NewItem.password(account: account, value: "secret-\(account)")
                item.accessControl = try AccessControl(protection: .whenUnlocked, flags: flags)
                try keychain.add(item)
            }
            try keychain.add(.password(account: "plain", value: "secret-plain", protection: .whenUnlocked))
            let (report, target, newDevice) = try backUpAndRestore(fixture, encrypted: encrypted, sameDevice: sameDevice)
            defer { withExtendedLifetime(newDevice) {} }
            #expect(report.neverExported == ["genericPassword.accessControl": 3], "\(report.neverExported)")
            #expect(report.items.count == 1)
            let restored = try contents(target)
            #expect(restored["plain"] == (!encrypted && !sameDevice ? nil : "secret-plain"))
            #expect(restored["any-face"] == nil && restored["this-face"] == nil && restored["passcode"] == nil, "\(restored)")
        }
    }

    @Test(
        "a wrong password or a damaged archive leaves the target exactly as it was, whatever passcode came with it; a wrong target passcode counts there, and nothing else changes"
    )
    func refusals() throws {
        let fixture = try source()
        let url = try archive(fixture, encrypted: true)
        let target = try TestDevice(seed: 5)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        target.device.powerOff()
        let before = try snapshot(target.directory)

        #expect(throws: ArchiveError.wrongPassword) {
            try DeviceRestore.restore(url, password: Data("nope".utf8), to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        // The password's key and the passcode's are derived side by side; the password's verdict
        // still comes first: a wrong passcode beside it is not counted, a missing one not named.
        #expect(throws: ArchiveError.wrongPassword) { try DeviceRestore.restore(url, password: Data("nope".utf8), to: target.directory, passcode: "000009") }
        #expect(throws: ArchiveError.wrongPassword) { try DeviceRestore.restore(url, password: Data("nope".utf8), to: target.directory, passcode: nil) }
        var bytes = try Data(contentsOf: url)
        bytes[bytes.count - 40] ^= 1
        let damaged = url.deletingLastPathComponent().appendingPathComponent("damaged.kfb")
        try bytes.write(to: damaged)
        #expect(throws: ArchiveError.self) {
            try DeviceRestore.restore(damaged, password: password, to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        try expectAsItWas(target, before)

        // The passcode is checked on the target itself: each wrong one is a failed attempt
        // there, and from the fifth the target waits, whatever passcode comes next.
        for (n, wrong) in ["000000", "000001", "000002", "000003", "000004"].enumerated() {
            #expect(throws: KeychainError.self) { try DeviceRestore.restore(url, password: password, to: target.directory, passcode: wrong) }
            let device = try Device.powerOn(at: target.directory)
            #expect(try device.status().failedPasscodeAttempts == n + 1)
            device.powerOff()
        }
        let waiting = #expect(throws: KeychainError.self) {
            try DeviceRestore.restore(url, password: password, to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        #expect(waiting?.message.contains("try again in") == true, "\(String(describing: waiting))")
        let device = try Device.powerOn(at: target.directory)
        #expect(try device.status().itemCount == 1, "its own item stays (it cannot be read until the wait is over)")
        device.powerOff()
        let siblings = try FileManager.default.contentsOfDirectory(atPath: target.directory.deletingLastPathComponent().path)
        #expect(siblings.filter { $0.hasPrefix(".") }.isEmpty, "\(siblings)")
    }

    @Test("an unencrypted archive forged under the target's identity is refused on the target, which is left exactly as it was")
    func forgedUnencryptedRefused() throws {
        let target = try TestDevice(seed: 6)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        let identity = target.device.info.id
        target.device.powerOff()
        let before = try snapshot(target.directory)
        // Everything a forger can know: the device's ID, the format, the public checksum key.
        // Not the device's hardware UID.
        let url = target.directory.deletingLastPathComponent().appendingPathComponent("forged.kfbackup")
        let forger = DeviceBackupKeys(deviceID: identity, hardwareUID: SymmetricKey())
        let writer = try ArchiveWriter(to: url, mode: .unencrypted, device: forger, deviceName: "Forged")
        try writer.append(.apps, try JSONEncoder.archive.encode([AppManifest(bundleID: TestDevice.appID, teamID: "EVILTEAM00")]))
        try writer.finish(ArchiveManifest())
        #expect(try ArchiveReader(contentsOf: url).read(password: nil).sectionCount == 1, "its checksums alone pass")
        #expect(throws: ArchiveError.corruptSection(index: 0, kind: "apps")) {
            try DeviceRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        #expect(try snapshot(target.directory) == before)
    }

    @Test("an unencrypted archive of another device is refused before the target is touched; accepted by name, the local items it removes are listed")
    func otherDeviceUnencryptedGated() throws {
        let target = try TestDevice(seed: 7)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        target.device.powerOff()
        let before = try snapshot(target.directory)
        // Anyone can write one: another device's ID, an app under a team of the writer's choosing.
        let url = target.directory.deletingLastPathComponent().appendingPathComponent("other.kfbackup")
        let writer = try ArchiveWriter(
            to: url, mode: .unencrypted, device: DeviceBackupKeys(deviceID: UUID(), hardwareUID: SymmetricKey()), deviceName: "Someone's")
        try writer.append(.apps, try JSONEncoder.archive.encode([AppManifest(bundleID: TestDevice.appID, teamID: "MALLORY123")]))
        try writer.finish(ArchiveManifest())
        let refusal = #expect(throws: ArchiveError.self) {
            try DeviceRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        guard case .unauthenticated(let why)? = refusal else {
            Issue.record("\(String(describing: refusal))")
            return
        }
        #expect(why.contains("another device") && why.contains("anyone could have written"))
        #expect(try snapshot(target.directory) == before)
        let report = try DeviceRestore.restore(
            url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        #expect(report.authenticity == .checksums)
        #expect(report.localItemsLost.map(\.reason) == [.notInArchive])
        #expect(report.localItemsLost.first?.name?.hasPrefix("target-own") == true)
    }

    @Test("a format 1 unencrypted archive claiming the target's identity is refused before the target is touched, unless accepted by name")
    func formatOneDowngradeRefused() throws {
        let target = try TestDevice(seed: 8)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        let url = target.directory.deletingLastPathComponent().appendingPathComponent("own.kfbackup")
        try DeviceBackup.create(from: target.device, to: url, mode: .unencrypted)
        target.device.powerOff()
        // The same header in format 1: its digest is public, so anyone can rewrite it.
        var bytes = [UInt8](try Data(contentsOf: url))
        bytes[9] = 1
        let headerEnd = 14 + Int(bytes[10..<14].reduce(0) { $0 << 8 | UInt32($1) })
        let digest = KeyedHash.digest(of: Array(bytes[..<headerEnd]), key: ArchiveFormat.headerDigestKey)
        bytes.replaceSubrange(headerEnd..<(headerEnd + 32), with: digest)
        try Data(bytes).write(to: url)
        #expect(try ArchiveReader(contentsOf: url).version == 1)
        let before = try snapshot(target.directory)
        let refusal = #expect(throws: ArchiveError.self) {
            try DeviceRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode)
        }
        guard case .unauthenticated(let why)? = refusal else {
            Issue.record("\(String(describing: refusal))")
            return
        }
        #expect(why.contains("claims to come from this device"))
        #expect(try snapshot(target.directory) == before)
        // Accepted by name, it is read as format 1 (whose sections this one's are not).
        #expect(throws: ArchiveError.self) {
            try DeviceRestore.restore(url, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        }
        #expect(try snapshot(target.directory) == before)
    }

    /// An unencrypted archive whose sandbox sections each carry one piece of a file of zeros,
    /// 4 MiB before compression and a few hundred bytes after.
    func zeros(pieces: Int, beside target: TestDevice) throws -> URL {
        let url = target.directory.deletingLastPathComponent().appendingPathComponent("zeros-\(pieces).kfbackup")
        let writer = try ArchiveWriter(
            to: url, mode: .unencrypted, device: DeviceBackupKeys(deviceID: UUID(), hardwareUID: SymmetricKey()), deviceName: "Crafted")
        try writer.append(.apps, Data("[]".utf8))
        let size = ArchiveFormat.maximumSectionBytes - 1024
        for index in 0..<pieces {
            let entry = SandboxEntry(
                bundleID: TestDevice.appID, path: "Documents/zeros", protection: "NSFileProtectionNone",
                offset: index * size, contents: Data(count: size))
            try writer.append(.sandbox, EntryList.encode([entry.encoded]))
        }
        try writer.finish(ArchiveManifest(sectionCount: pieces + 1, counts: ["sandboxFiles": 1]))
        return url
    }

    @Test(
        "a file arrives piece by piece and is written as it comes; compressed zeros past 4,096 times the archive's size are refused, the target left as it was")
    func decompressionBounded() throws {
        let target = try TestDevice(seed: 5)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        target.device.powerOff()

        let small = try zeros(pieces: 3, beside: target)
        _ = try DeviceRestore.restore(small, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        let device = try Device.powerOn(at: target.directory)
        try device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try device.sandbox(for: TestDevice.appID).readFile("zeros").count == 3 * (ArchiveFormat.maximumSectionBytes - 1024))
        device.powerOff()
        let before = try snapshot(target.directory)

        let bomb = try zeros(pieces: 80, beside: target)
        #expect(try FileManager.default.attributesOfItem(atPath: bomb.path)[.size] as? Int ?? 0 < 64 << 10, "kilobytes on disk")
        for attempt in [
            { _ = try DeviceRestore.restore(bomb, password: nil, to: target.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true) },
            { _ = try ArchiveReader(contentsOf: bomb).read(password: nil) },
        ] {
            #expect {
                try attempt()
            } throws: { error in
                guard case .inconsistent(let why)? = error as? ArchiveError else { return false }
                return why.contains("once decompressed")
            }
        }
        #expect(try snapshot(target.directory) == before)
        let siblings = try FileManager.default.contentsOfDirectory(atPath: target.directory.deletingLastPathComponent().path)
        #expect(siblings.filter { $0.hasPrefix(".") }.isEmpty, "no staging copy is left: \(siblings)")
    }

    /// The target byte for byte as `before`, its own item readable, nothing left beside it.
    func expectAsItWas(_ target: TestDevice, _ before: [String: Data], sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try snapshot(target.directory) == before, sourceLocation: sourceLocation)
        #expect(try contents(target.directory)["target-own"] == "keep", sourceLocation: sourceLocation)
        let siblings = try FileManager.default.contentsOfDirectory(atPath: target.directory.deletingLastPathComponent().path)
        #expect(siblings.filter { $0.hasPrefix(".") }.isEmpty, "\(siblings)", sourceLocation: sourceLocation)
    }

    @Test("a restore stopped at its last chance, after the whole import, leaves the target exactly as it was")
    func stoppedBeforeSwap() throws {
        let fixture = try source()
        let url = try archive(fixture, encrypted: true)
        let rehearsal = try TestDevice(seed: 4)
        let target = try TestDevice(seed: 5)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        rehearsal.device.powerOff()
        target.device.powerOff()
        let before = try snapshot(target.directory)

        // The same restore onto another device says how many times progress is heard.
        var calls = 0
        _ = try DeviceRestore.restore(url, password: password, to: rehearsal.directory, passcode: TestDevice.defaultPasscode) { _, _ in calls += 1 }
        var heard = 0
        #expect(throws: CancellationError.self) {
            try DeviceRestore.restore(url, password: password, to: target.directory, passcode: TestDevice.defaultPasscode) { done, total in
                heard += 1
                if heard == calls {
                    #expect(done == total)
                    throw CancellationError()
                }
            }
        }
        try expectAsItWas(target, before)
    }

    @Test(
        "several keychain sections, each opened while the last is written: every item back in archive order; stopped with one section written and the next opening, the target is as it was"
    )
    func pipelinedSections() throws {
        // An export batch is 10,000 items, each its own section at least: three sections.
        let fixture = try TestDevice(seed: 2)
        try fixture.keychain().importItems((0..<21_000).map { NewItem.password(account: "n\($0)", value: "v\($0)") })
        let url = try archive(fixture, encrypted: true)
        var sections = 0
        try ArchiveReader(contentsOf: url).read(password: password) { kind, _ in sections += kind == .keychain ? 1 : 0 }
        #expect(sections >= 3)

        let target = try TestDevice(seed: 5)
        try target.keychain().add(.password(account: "target-own", value: "keep"))
        target.device.powerOff()
        let before = try snapshot(target.directory)
        #expect(throws: CancellationError.self) {
            try DeviceRestore.restore(url, password: password, to: target.directory, passcode: TestDevice.defaultPasscode) { done, _ in
                if done > 0 { throw CancellationError() }
            }
        }
        try expectAsItWas(target, before)

        let report = try DeviceRestore.restore(url, password: password, to: target.directory, passcode: TestDevice.defaultPasscode)
        #expect(report.restoredCount == 21_000)
        #expect(report.items.map { $0.name?.components(separatedBy: " @ ").first } == (0..<21_000).map { "n\($0)" })
        let restored = try contents(target.directory)
        #expect(restored.count == 21_000, "the target's own non-synchronizable item is replaced, as a restore does")
        #expect(restored["n20999"] == "v20999")
    }

    @Test("a swap cut between its two renames is finished by whoever next takes the device; a half-built restore is undone")
    func interruptedSwap() throws {
        let fixture = try source()
        fixture.device.powerOff()
        let directory = fixture.directory
        let parent = directory.deletingLastPathComponent()
        // Cut after the point of no return: the new device marked ready, the old one moved aside.
        let staging = Device.stagingDirectory(for: directory)
        try FileManager.default.copyItem(at: directory, to: staging)
        #expect(FileManager.default.createFile(atPath: staging.appendingPathComponent("replace-ready").path, contents: Data()))
        try FileManager.default.moveItem(at: directory, to: parent.appendingPathComponent(".device.replaced-1"))
        try DeviceHold.take(directory).release()
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("device.json").path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path).filter { $0.hasPrefix(".") }.isEmpty)
        // Cut before it: the old device moved aside, the new one not ready.
        try FileManager.default.moveItem(at: directory, to: parent.appendingPathComponent(".device.replaced-2"))
        try FileManager.default.createDirectory(at: parent.appendingPathComponent(".device.restoring-x"), withIntermediateDirectories: true)
        try DeviceHold.take(directory).release()
        #expect(try contents(directory)["acct-always-local"] == "secret-always-local")
        // Cut after the swap, before its clean-up: the marker still in place clears the old device.
        try FileManager.default.createDirectory(at: parent.appendingPathComponent(".device.replaced-3"), withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("replace-ready").path, contents: Data()))
        try DeviceHold.take(directory).release()
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path).filter { $0.hasPrefix(".device.replaced") }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("replace-ready").path))
    }

    /// Every file's bytes under a directory, by relative path.
    func snapshot(_ directory: URL) throws -> [String: Data] { try deviceSnapshot(directory) }

    /// Archives written in format 2, before item keys (`Tests/Fixtures/before-item-keys`), by
    /// the device beside them (passcode `1234`; the items are listed in FormatUpgradeTests).
    static let formatTwo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/before-item-keys")

    @Test("format 2 archives still restore: encrypted onto a new device (migratable items), unencrypted onto the device that wrote them (all)")
    func formatTwoArchives() throws {
        let encrypted = Self.formatTwo.appendingPathComponent("v2-encrypted.kfbackup")
        #expect(try ArchiveReader(contentsOf: encrypted).version == 2)
        let newDevice = try TestDevice(seed: 11)
        newDevice.device.powerOff()
        let report = try DeviceRestore.restore(
            encrypted, password: Data("secret password".utf8), to: newDevice.directory, passcode: TestDevice.defaultPasscode)
        #expect(
            report.items.filter(\.restored).compactMap(\.name).sorted() == [
                "alice @ sync", "bob @ imap.example.com", "user1 @ mail", "user2 @ mail", "user3 @ mail",
            ])
        #expect(Set(report.items.filter { !$0.restored }.map(\.reason)) == [.deviceBound])
        let restored = try contents(newDevice.directory)
        #expect(restored["user1"] == "secret-whenUnlocked" && restored["alice"] == "synced" && restored["bob"] == "inet-pass")

        let source = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-format2-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: source) }
        try FileManager.default.copyItem(at: Self.formatTwo.appendingPathComponent("device"), to: source)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: source.appendingPathComponent("hardware-uid").path)
        let plain = try DeviceRestore.restore(Self.formatTwo.appendingPathComponent("v2-unencrypted.kfbackup"), password: nil, to: source, passcode: "1234")
        #expect(plain.sameDevice && plain.authenticity == .device)
        #expect(plain.items.count == 8 && plain.items.allSatisfy(\.restored), "every item but the never exported whenPasscodeSetThisDeviceOnly one")
        let back = try contents(source, passcode: "1234")
        #expect(back["user4"] == "secret-whenUnlockedThisDeviceOnly" && back["user6"] == "secret-alwaysThisDeviceOnly" && back["user7"] == nil)
    }
}

@Suite("Restore of a backup that holds one item twice")
struct DuplicateItemRestoreTests {
    /// The device's items as an export hands them out now: what a backup seals.
    func exported(_ device: Device) throws -> [ExportedItem] {
        var items: [ExportedItem] = []
        _ = try device.deviceKeychain.forEachExportBatch(secrets: .sealed) {
            $0
        } consume: { batches, _, _ in
            items += batches.flatMap { $0 }
        }
        return items
    }

    @Test("an item written twice, in two sections, by UUID or by primary key: the later takes its place, the earlier is reported replacedInBackup")
    func laterReplacesEarlier() throws {
        let fixture = try TestDevice(seed: 41)
        let keychain = try fixture.keychain()
        try keychain.add(.password(account: "same-uuid", value: "first"))
        try keychain.add(.password(account: "same-key", value: "first"))
        let before = try exported(fixture.device)
        // The same UUID with a new secret; the same primary key under a new UUID.
        func item(_ account: String) -> ItemQuery {
            var query = ItemQuery.password(account: account)
            query.returning = []
            return query
        }
        try keychain.update(item("same-uuid"), with: ItemChanges(data: Data("second".utf8)))
        try keychain.delete(item("same-key"))
        try keychain.add(.password(account: "same-key", value: "second"))
        let after = try exported(fixture.device)
        #expect(Set(before.map(\.uuid)).intersection(after.map(\.uuid)).count == 1, "one UUID in both, one replaced")

        // An archive of this device, as a writer that wrote every version it saw would make it.
        let url = fixture.directory.deletingLastPathComponent().appendingPathComponent("twice-\(UUID().uuidString.prefix(6)).kfbackup")
        let writer = try ArchiveWriter(to: url, mode: .unencrypted, device: fixture.device.backupKeys, deviceName: fixture.device.info.name)
        try writer.append(.apps, try JSONEncoder.archive.encode(fixture.device.installedApps()))
        for items in [before, after] {
            let entries = items.map { item -> [UInt8] in
                guard case .sealed(let seal) = item.secret else { preconditionFailure("exported sealed") }
                return ArchivedItem(
                    item, seal: seal, wrapping: .device, key: fixture.device.backupKeys.items, binding: writer.itemBinding, named: false,
                    nonce: SystemEntropy().bytes(AEAD.nonceByteCount)
                ).encoded
            }
            try writer.append(.keychain, EntryList.encode(entries))
        }
        try writer.finish(ArchiveManifest())
        fixture.device.powerOff()

        let report = try DeviceRestore.restore(url, password: nil, to: fixture.directory, passcode: TestDevice.defaultPasscode)
        let replaced = report.items.filter { $0.reason == .replacedInBackup }
        #expect(Set(replaced.map(\.uuid)) == Set(before.map(\.uuid)), "both first versions: one by its UUID, one by its primary key")
        let restoredUUIDs: Set<UUID> = Set(report.items.filter(\.restored).map(\.uuid))
        #expect(restoredUUIDs == Set(after.map(\.uuid)))
        #expect(report.restoredCount == 2 && report.items.count == 4)

        let contents = try DeviceRestoreTests().contents(fixture.directory)
        #expect(contents["same-uuid"] == "second" && contents["same-key"] == "second")
    }
}
