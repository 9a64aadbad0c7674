import Foundation
import KeychainModel
import KeychainTesting
import KeyferryCrypto
import Testing

@testable import KeychainStore

@Suite("Device lifecycle")
struct DeviceLifecycleTests {
    @Test("a wrong passcode is errSecAuthFailed and counts a failed attempt; the right one resets the count")
    func wrongPasscode() throws {
        let t = try TestDevice()
        try t.device.reboot()
        #expect(status { try t.device.unlock(passcode: "000000") } == .authFailed)
        #expect(status { try t.device.unlock(passcode: "111111") } == .authFailed)
        #expect(try t.device.status().failedPasscodeAttempts == 2)
        #expect(try t.device.status().lockState == .beforeFirstUnlock)
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try t.device.status().failedPasscodeAttempts == 0)
        #expect(try t.device.status().lockState == .unlocked)
    }

    @Test("the same wrong passcode again counts once; from the fifth failure the device waits longer each time, refusing even the right passcode")
    func passcodeDelays() throws {
        let t = try TestDevice()
        try t.device.reboot()
        func attempt(_ passcode: String) -> KeychainError? {
            do {
                try t.device.unlock(passcode: passcode)
                return nil
            } catch { return error as? KeychainError }
        }
        func state() throws -> (failed: Int, wait: TimeInterval?) {
            let status = try t.device.status()
            return (status.failedPasscodeAttempts, status.passcodeRetryAfter)
        }
        for _ in 0..<3 { #expect(attempt("000000")?.status == .authFailed) }
        #expect(try state().failed == 1)
        #expect(attempt("000000")?.message.contains("does not count again") == true)
        for wrong in ["111111", "222222", "333333"] { #expect(attempt(wrong)?.status == .authFailed) }
        #expect(try state().failed == 4 && state().wait == nil, "no delay before the fifth failure")

        let fifth = attempt("444444")
        #expect(fifth?.message.contains("Failed attempts: 5. The device is disabled: try again in 1 min") == true, "\(String(describing: fifth))")
        #expect(try state().wait == 60)
        let waiting = attempt(TestDevice.defaultPasscode)
        #expect(waiting?.status == .authFailed && waiting?.message.contains("try again in 1 min; no passcode is tried") == true)
        t.clock.advance(by: 59)
        #expect(attempt(TestDevice.defaultPasscode)?.message.contains("try again in 1 s") == true)
        #expect(try state().failed == 5 && t.device.lockState == .beforeFirstUnlock)

        // Each later failure waits longer: 5 minutes, 15, 15, then an hour. A reboot forgets none of it.
        for (wrong, delay) in [("555555", 300.0), ("666666", 900), ("777777", 900), ("888888", 3600)] {
            t.clock.advance(by: 60)
            #expect(attempt(wrong)?.status == .authFailed)
            #expect(try state().wait == delay, "after \(wrong)")
            try t.device.reboot()
            t.clock.advance(by: delay - 60)
        }
        #expect(try state().failed == 9 && state().wait == 60)
        #expect(attempt(TestDevice.defaultPasscode)?.message.contains("try again in 1 min") == true)
        t.clock.advance(by: 60)
        #expect(attempt(TestDevice.defaultPasscode) == nil)
        #expect(try state().failed == 0 && state().wait == nil && t.device.lockState == .unlocked)
    }

    @Test("the back-off follows real time: moving the device's clock, which needs no passcode, shortens no wait")
    func backOffIgnoresAdvancedClock() throws {
        let real = ManualClock()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let options = DeviceOptions(name: "Test iPhone", passcode: TestDevice.defaultPasscode, passcodeHashing: .minimum)
        try Device.create(at: root, options: options).powerOff()
        let device = try Device.powerOn(at: root, clock: AdvancingClock(real))
        defer { device.powerOff() }
        for wrong in ["000001", "000002", "000003", "000004", "000005"] { #expect(status { try device.unlock(passcode: wrong) } == .authFailed) }
        #expect(try device.status().passcodeRetryAfter == 60)
        try device.advanceClock(by: 2 * 3600)
        #expect(try device.status().passcodeRetryAfter == 60, "two hours on the device's clock, none in real time")
        let refused = #expect(throws: KeychainError.self) { try device.unlock(passcode: TestDevice.defaultPasscode) }
        #expect(refused?.message.contains("try again in 1 min") == true, "\(String(describing: refused))")
        real.advance(by: 60)
        try device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try device.status().failedPasscodeAttempts == 0)
    }

    @Test("concurrent wrong unlocks cannot race the check: from zero, exactly five are tried before the wait")
    func concurrentUnlocks() async throws {
        let t = try TestDevice()
        try t.device.reboot()
        let device = t.device
        let outcomes = await withTaskGroup(of: String.self) { group in
            for index in 0..<12 {
                group.addTask {
                    do {
                        try device.unlock(passcode: String(format: "9%05d", index))
                        return "unlocked"
                    } catch {
                        return (error as? KeychainError)?.message ?? "\(error)"
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(try t.device.status().failedPasscodeAttempts == 5)
        #expect(outcomes.filter { $0.contains("no passcode is tried") }.count == 7, "\(outcomes)")
    }

    @Test("the last wrong passcode is kept as a hash of its stretched key: checking a guess against it costs the key derivation")
    func lastWrongCostsTheDerivation() throws {
        let t = try TestDevice()
        try t.device.reboot()
        #expect(status { try t.device.unlock(passcode: "246810") } == .authFailed)
        let settings = try t.device.database.unsafeRead { try Keybag.Settings.load($0) }
        let stored = try #require(settings.attempts.lastWrong)
        let keybag = t.device.keybag
        #expect(stored == keybag.attemptHash(try keybag.passcodeKey("246810", settings: settings)), "the recorded wrong passcode is the one tried")
        #expect(stored != KeyedHash.digest(of: Array("246810".utf8), key: keybag.attemptKey, length: 16), "a hash under the UID alone")
    }

    @Test("every check of a passcode counts: a passcode change and an item's devicePasscode prompt, the same wrong one once, one per request")
    func everyPasscodeCheckCounts() throws {
        let t = try TestDevice()
        #expect(status { try t.device.setPasscode("654321", current: "000000") } == .authFailed)
        #expect(try t.device.status().failedPasscodeAttempts == 1)
        let keychain = try t.keychain()
        try keychain.add(
            NewItem(
                .genericPassword, attributes: [.account: .string("guarded"), .service: .string("com.example.app")], data: Data("g".utf8),
                accessControl: try AccessControl(protection: .whenUnlocked, flags: [.devicePasscode])))
        var query = ItemQuery.password(account: "guarded")
        query.authentication = .responding(.passcode("111111"))
        for _ in 0..<2 { #expect(status { _ = try keychain.copy(query) } == .authFailed) }
        #expect(try t.device.status().failedPasscodeAttempts == 2)
        // One request, one guess: a request carrying several passcodes has its first tried.
        query.authentication = .responding(.passcode("222222"), .passcode(TestDevice.defaultPasscode))
        #expect(status { _ = try keychain.copy(query) } == .authFailed)
        #expect(try t.device.status().failedPasscodeAttempts == 3)
        query.authentication = .responding(.passcode(TestDevice.defaultPasscode))
        #expect(try keychain.copy(query).first?.data == Data("g".utf8))
        #expect(try t.device.status().failedPasscodeAttempts == 0)
    }

    @Test("changing the passcode keeps every item; the old passcode stops working")
    func changePasscode() throws {
        let t = try TestDevice()
        try t.keychain().add(.password(account: "a", protection: .whenPasscodeSetThisDeviceOnly))
        #expect(status { try t.device.setPasscode("222222", current: "999999") } == .authFailed)
        try t.device.setPasscode("222222", current: TestDevice.defaultPasscode)
        try t.device.reboot()
        #expect(status { try t.device.unlock(passcode: TestDevice.defaultPasscode) } == .authFailed)
        try t.device.unlock(passcode: "222222")
        #expect(try t.keychain().copy(.password(account: "a")).count == 1)
    }

    @Test("the passcode cannot change while locked")
    func passcodeNeedsUnlock() throws {
        let t = try TestDevice()
        try t.device.lock(immediately: true)
        #expect(status { try t.device.setPasscode("222222", current: TestDevice.defaultPasscode) } == .interactionNotAllowed)
    }

    @Test("locking at once a device already locked within its grace period drops class A there and then; a second plain lock keeps the first one's time")
    func lockNowDuringGrace() throws {
        let t = try TestDevice(grace: 60)
        try t.keychain().add(.password(account: "a", protection: .whenUnlocked))
        try t.device.lock()
        #expect(try t.keychain().copy(.password(account: "a")).count == 1, "within the grace period")
        t.clock.advance(by: 40)
        try t.device.lock()
        t.clock.advance(by: 30)
        #expect(status { _ = try t.keychain().copy(.password(account: "a")) } == .interactionNotAllowed, "the grace runs from the first lock")
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        try t.device.lock()
        #expect(t.device.isProtectedDataAvailable)
        try t.device.lock(immediately: true)
        #expect(!t.device.isProtectedDataAvailable)
        #expect(status { _ = try t.keychain().copy(.password(account: "a")) } == .interactionNotAllowed)
    }

    @Test(
        "two tiers of keys, one lock: while locked a class A item's attributes are as unreadable as its secret, a class C item's read with the metadata key alone, and a delete needs neither"
    )
    func attributesFollowTheLock() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "a", protection: .whenUnlocked))
        try keychain.add(.password(account: "c", protection: .afterFirstUnlock))
        func attributes(_ account: String) -> ItemQuery {
            var query = ItemQuery.password(account: account)
            query.returning = .attributes
            return query
        }
        try t.device.lock(immediately: true)
        #expect(status { _ = try keychain.copy(attributes("a")) } == .interactionNotAllowed)
        #expect(status { _ = try keychain.copy(.password(account: "a")) } == .interactionNotAllowed)
        #expect(try keychain.copy(attributes("c")).first?.attributes[.account] == .string("c"))
        var delete = attributes("a")
        delete.returning = []
        try keychain.delete(delete)
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(status { _ = try keychain.copy(attributes("a")) } == .itemNotFound)
    }

    @Test("a device without a passcode boots unlocked and keeps its keys when locked")
    func noPasscode() throws {
        let t = try TestDevice(passcode: nil)
        try t.keychain().add(.password(account: "a"))
        try t.device.reboot()
        #expect(try t.device.status().lockState == .unlocked)
        try t.device.lock(immediately: true)
        #expect(try t.keychain().copy(.password(account: "a")).count == 1)
        #expect(throws: DeviceError.self) { try t.device.enrollBiometry() }
    }

    @Test("before first unlock only always-class items are readable")
    func beforeFirstUnlock() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        for protection in ProtectionClass.allCases {
            try keychain.add(.password(account: protection.name, protection: protection))
        }
        try t.device.reboot()
        for protection in ProtectionClass.allCases {
            let expected: KeychainStatus = protection.availability == .always ? .success : .interactionNotAllowed
            #expect(status { _ = try keychain.copy(.password(account: protection.name)) } == expected, "\(protection.name)")
        }
    }

    @Test("removing the passcode turns biometry off, as on iOS")
    func removingPasscodeRemovesBiometry() throws {
        let t = try TestDevice(biometry: true)
        #expect(try t.device.status().biometryEnrolled)
        try t.device.removePasscode(current: TestDevice.defaultPasscode)
        #expect(try !t.device.status().biometryEnrolled)
    }

    @Test("a device directory is refused when it is not empty, not a device, or of a newer format")
    func badDirectories() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-bad-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let keep = root.appendingPathComponent("keep.txt")
        try Data("mine".utf8).write(to: keep)
        #expect(throws: DeviceError(.alreadyExists, "\(root.path) already exists and is not empty; choose a new directory for the device.")) {
            try Device.create(at: root, options: DeviceOptions(passcodeHashing: .minimum))
        }
        #expect(try Data(contentsOf: keep) == Data("mine".utf8), "a refused create leaves the directory as it was")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["keep.txt"])

        do {
            _ = try Device.powerOn(at: root)
            Issue.record("a directory without device.json must be refused")
        } catch let error as DeviceError {
            #expect(error.code == .notADevice)
        }

        let device = root.appendingPathComponent("phone")
        try Device.create(at: device, options: DeviceOptions(passcodeHashing: .minimum))
        let info = device.appendingPathComponent("device.json")
        let original = try Data(contentsOf: info)
        var json = try JSONSerialization.jsonObject(with: original) as! [String: Any]
        json["format"] = 99
        try JSONSerialization.data(withJSONObject: json).write(to: info)
        do {
            _ = try Device.powerOn(at: device)
            Issue.record("a newer device format must be refused")
        } catch let error as DeviceError {
            #expect(error.code == .unsupportedFormat)
        }
        try original.write(to: info)
        try FileManager.default.removeItem(at: device.appendingPathComponent("hardware-uid"))
        do {
            _ = try Device.powerOn(at: device)
            Issue.record("a device without its hardware UID must be refused")
        } catch let error as DeviceError {
            #expect(error.code == .corrupt)
        }
    }

    @Test("bad app manifests are refused and install nothing")
    func badApps() throws {
        let t = try TestDevice(apps: [])
        for app in [
            AppManifest(bundleID: "", teamID: TestDevice.teamID), AppManifest(bundleID: "com/evil", teamID: TestDevice.teamID),
            AppManifest(bundleID: "com.ok", teamID: "short"), AppManifest(bundleID: "com.ok", teamID: TestDevice.teamID, accessGroups: ["OTHERTEAM1.x"]),
        ] {
            #expect(throws: DeviceError.self) { try t.device.install(app) }
        }
        #expect(try t.device.installedApps().isEmpty)
    }

    @Test("sandbox files honour their protection class and stay inside Documents")
    func sandboxFiles() throws {
        let t = try TestDevice()
        let sandbox = try t.device.sandbox(for: TestDevice.appID)
        try sandbox.writeFile("notes/secret.txt", Data("a".utf8), protection: .complete)
        try sandbox.writeFile("cache.bin", Data("b".utf8))
        try t.device.lock(immediately: true)
        #expect(throws: DeviceError.self) { try sandbox.readFile("notes/secret.txt") }
        #expect(try sandbox.readFile("cache.bin") == Data("b".utf8))
        #expect(throws: DeviceError.self) { try sandbox.writeFile("../escape", Data()) }
    }

    @Test(
        "a protected file has one spelling: every other way to write its path is refused, locked or unlocked, never read past its class",
        arguments: ["notes//secret.txt", "notes/./secret.txt", "notes/secret.txt/", "./notes/secret.txt", "/notes/secret.txt", "notes/x/../secret.txt", ""])
    func pathAliases(alias: String) throws {
        let t = try TestDevice()
        let sandbox = try t.device.sandbox(for: TestDevice.appID)
        try sandbox.writeFile("notes/secret.txt", Data("classified".utf8), protection: .complete)
        for locked in [false, true] {
            if locked { try t.device.lock(immediately: true) }
            let refusal = #expect(throws: DeviceError.self) { try sandbox.readFile(alias) }
            #expect(refusal?.code == .invalidArgument, "\(String(describing: refusal))")
            #expect(throws: DeviceError.self) { try sandbox.writeFile(alias, Data("other".utf8), protection: .none) }
            #expect(throws: DeviceError.self) { try sandbox.removeFile(alias) }
        }
        #expect(try sandbox.files().map(\.path) == ["notes/secret.txt"])
    }

    @Test("a file under Documents that no write recorded gets the strictest class: unreadable while locked")
    func unrecordedFileIsStrict() throws {
        let t = try TestDevice()
        let sandbox = try t.device.sandbox(for: TestDevice.appID)
        try sandbox.writeFile("known.txt", Data("k".utf8))
        let documents = t.directory.appendingPathComponent("apps/\(TestDevice.appID)/Documents")
        try Data("planted".utf8).write(to: documents.appendingPathComponent("planted.txt"))
        #expect(try sandbox.readFile("planted.txt") == Data("planted".utf8))
        try t.device.lock(immediately: true)
        #expect(throws: DeviceError.self) { try sandbox.readFile("planted.txt") }
    }

    @Test("UserDefaults refuses a value a property list cannot hold and keeps what it had")
    func defaultsRefuseNonPlistValues() throws {
        let t = try TestDevice()
        let sandbox = try t.device.sandbox(for: TestDevice.appID)
        try sandbox.set("alice", forKey: "user")
        struct NotAPlistValue {}
        #expect(throws: DeviceError.self) { try sandbox.set(NotAPlistValue(), forKey: "bad") }
        #expect(try sandbox.defaults().count == 1)
        #expect(try sandbox.string(forKey: "user") == "alice")
    }
}

@Suite("Crash points")
struct CrashPointTests {
    @Test("a sandbox left behind by an interrupted uninstall is not seen by the next install")
    func interruptedUninstall() throws {
        let t = try TestDevice()
        try t.device.sandbox(for: TestDevice.appID).set("alice", forKey: "user")
        let leftover = t.directory.appendingPathComponent("apps/\(TestDevice.appID)")
        let copy = t.directory.deletingLastPathComponent().appendingPathComponent("sandbox-copy")
        try FileManager.default.copyItem(at: leftover, to: copy)
        try t.device.uninstall(bundleID: TestDevice.appID)
        // The crash: the registry row is gone but the files survived.
        try FileManager.default.moveItem(at: copy, to: leftover)
        try t.device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        #expect(try t.device.sandbox(for: TestDevice.appID).defaults().isEmpty)
    }

    @Test("a failing update in the middle of a batch leaves every item as it was")
    func atomicUpdate() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "a", value: "A"))
        try keychain.add(.password(account: "b", value: "B"))
        #expect(
            status { try keychain.update(ItemQuery(.genericPassword), with: ItemChanges(attributes: [.account: .string("same")], data: Data("X".utf8))) }
                == .duplicateItem)
        #expect(try keychain.copy(.password(account: "a")).first?.data == Data("A".utf8))
        #expect(try keychain.copy(.password(account: "b")).first?.data == Data("B".utf8))
        #expect(status { _ = try keychain.copy(.password(account: "same")) } == .itemNotFound)
    }

    @Test("a bulk import with one duplicate or one bad item adds nothing, wherever it is among the batches")
    func atomicImport() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "taken"))
        // Sealing runs a batch of 4,096 ahead of the inserts: the failures land in the first
        // batch while the second is being sealed, and in the last.
        let items = (0..<9_000).map { NewItem.password(account: "n\($0)") }
        let duplicate = Array(items[..<2_000]) + [.password(account: "taken")] + items[2_000...]
        #expect(status { try keychain.importItems(duplicate) } == .duplicateItem)
        var unknownAttribute = items
        unknownAttribute[8_500].attributes[.server] = .string("a generic password has no server")
        #expect(status { try keychain.importItems(unknownAttribute) } == .noSuchAttr)
        #expect(status { _ = try keychain.copy(.password(account: "n0")) } == .itemNotFound)
        try keychain.importItems(items)
        #expect(try keychain.copy(ItemQuery(.genericPassword, matchLimit: .all)).count == 9_001)
    }

    @Test("a powered-on device is held until it powers off: another power-on or a read at rest fails with inUse, and changes nothing")
    func heldWhilePoweredOn() throws {
        let t = try TestDevice()
        #expect { try Device.powerOn(at: t.directory) } throws: { ($0 as? DeviceError)?.code == .inUse }
        #expect { try Device.status(at: t.directory) } throws: { ($0 as? DeviceError)?.code == .inUse }
        #expect(t.device.lockState == .unlocked, "the holder is untouched")
        t.device.powerOff()
        #expect(try Device.status(at: t.directory).poweredOn == false)
        let again = try Device.powerOn(at: t.directory, clock: t.clock)
        #expect(again.lockState == .beforeFirstUnlock)
        // A reboot keeps the device held.
        try again.reboot()
        #expect { try Device.status(at: t.directory) } throws: { ($0 as? DeviceError)?.code == .inUse }
        again.powerOff()
    }

    @Test("a device is made powered off and unheld, with no unlock to pay for; its first power-on is before first unlock")
    func initializedPoweredOff() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-test-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("device")
        try Device.initialize(at: directory, options: DeviceOptions(passcode: "123456", passcodeHashing: .minimum))
        let status = try Device.status(at: directory)
        #expect(!status.poweredOn && status.passcodeSet && status.failedPasscodeAttempts == 0)
        let device = try Device.powerOn(at: directory)
        #expect(device.lockState == .beforeFirstUnlock)
        device.powerOff()
    }

    @Test("the change sequence never repeats, even after the newest item is deleted and the device restarts")
    func changeSequenceSurvivesDeletes() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "a"))
        try keychain.add(.password(account: "b"))
        let before = try t.device.deviceKeychain.changes(since: 0).map(\.changeSequence).max()!
        try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("b")]))
        t.device.powerOff()
        let reopened = try Device.powerOn(at: t.directory, clock: t.clock)
        try reopened.unlock(passcode: TestDevice.defaultPasscode)
        try reopened.keychain(for: TestDevice.appID).add(.password(account: "c"))
        let after = try reopened.deviceKeychain.changes(since: before).map(\.changeSequence)
        #expect(after.count == 1)
        #expect(after.allSatisfy { $0 > before })
    }
}

@Suite("Concurrency")
struct ConcurrencyTests {
    @Test("adds, reads and deletes from many tasks at once all land, with distinct change sequences")
    func concurrentCalls() async throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for n in 0..<50 {
                        try keychain.add(.password(account: "w\(worker)-\(n)", value: "v\(n)"))
                        #expect(try keychain.copy(.password(account: "w\(worker)-\(n)")).first?.data == Data("v\(n)".utf8))
                        if n % 5 == 0 { try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("w\(worker)-\(n)")])) }
                    }
                }
            }
            try await group.waitForAll()
        }
        let all = try keychain.copy(ItemQuery(.genericPassword, matchLimit: .all, returning: .attributes))
        #expect(all.count == 8 * 40)
        let sequences = try t.device.deviceKeychain.changes(since: 0).map(\.changeSequence)
        #expect(Set(sequences).count == sequences.count)
    }
}
