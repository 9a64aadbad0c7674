import Foundation
import KeychainModel
import KeychainStore  // a Device's calls, named by no type here
import KeychainTesting
import Testing

/// The device scenarios that the seed documents say only a physical device shows.
@Suite("Seed scenarios")
struct SeedScenarioTests {
    // Seed 001, critical scenario 1: reboot and before-first-unlock.
    @Test("after a reboot, afterFirstUnlock items are unreadable until the first unlock, then readable while locked")
    func rebootBeforeFirstUnlock() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "bg", protection: .afterFirstUnlock))
        try t.device.reboot()
        #expect(status { _ = try keychain.copy(.password(account: "bg")) } == .interactionNotAllowed)
        #expect(try t.device.status().lockState == .beforeFirstUnlock)
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        try t.device.lock(immediately: true)
        #expect(try keychain.copy(.password(account: "bg")).first?.data == Data("secret".utf8))
    }

    // Seed 001, critical scenario 2: lock timing.
    @Test("a whenUnlocked item is readable during the grace period and fails with -25308 once it ends")
    func lockTiming() throws {
        let t = try TestDevice(grace: 10)
        let keychain = try t.keychain()
        try keychain.add(.password(account: "fg"))
        try t.device.lock()
        t.clock.advance(by: 9)
        #expect(try keychain.copy(.password(account: "fg")).count == 1)
        #expect(t.device.isProtectedDataAvailable)
        t.clock.advance(by: 1)
        #expect(status { _ = try keychain.copy(.password(account: "fg")) } == .interactionNotAllowed)
        #expect(!t.device.isProtectedDataAvailable)
    }

    @Test("locking immediately skips the grace period")
    func lockNow() throws {
        let t = try TestDevice(grace: 10)
        let keychain = try t.keychain()
        try keychain.add(.password(account: "fg"))
        try t.device.lock(immediately: true)
        #expect(status { _ = try keychain.copy(.password(account: "fg")) } == .interactionNotAllowed)
    }

    // Seed 001, critical scenario 3: passcode removal.
    @Test("removing the passcode deletes every whenPasscodeSetThisDeviceOnly item for good")
    func passcodeRemoval() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "vault", protection: .whenPasscodeSetThisDeviceOnly))
        try keychain.add(.password(account: "normal", protection: .whenUnlockedThisDeviceOnly))
        try t.device.removePasscode(current: TestDevice.defaultPasscode)
        #expect(status { _ = try keychain.copy(.password(account: "vault")) } == .itemNotFound)
        #expect(try keychain.copy(.password(account: "normal")).count == 1)
        // Setting a new passcode does not bring them back.
        try t.device.setPasscode("654321", current: nil)
        #expect(status { _ = try keychain.copy(.password(account: "vault")) } == .itemNotFound)
    }

    // Seed 001, critical scenario 4: biometry enrollment change.
    @Test("a biometryCurrentSet item fails with -25293 after the enrolled biometry changes; biometryAny survives")
    func biometryEnrollmentChange() throws {
        let t = try TestDevice(biometry: true)
        let keychain = try t.keychain()
        let current = try AccessControl(protection: .whenPasscodeSetThisDeviceOnly, flags: [.biometryCurrentSet])
        let any = try AccessControl(protection: .whenUnlockedThisDeviceOnly, flags: [.biometryAny])
        try keychain.add(NewItem(.genericPassword, attributes: [.account: .string("current")], data: Data("a".utf8), accessControl: current))
        try keychain.add(NewItem(.genericPassword, attributes: [.account: .string("any")], data: Data("b".utf8), accessControl: any))
        var read = ItemQuery(
            .genericPassword, attributes: [.account: .string("current")], returning: .data,
            authentication: .responding(.biometryMatch))
        #expect(try keychain.copy(read).first?.data == Data("a".utf8))
        try t.device.changeBiometryEnrollment()
        #expect(status { _ = try keychain.copy(read) } == .authFailed)
        read.attributes = [.account: .string("any")]
        #expect(try keychain.copy(read).first?.data == Data("b".utf8))
    }

    // Seed 001, critical scenario 6: background access while locked.
    @Test("while locked, afterFirstUnlock items are readable and whenUnlocked items are not")
    func backgroundAccessWhileLocked() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "push", protection: .afterFirstUnlockThisDeviceOnly))
        try keychain.add(.password(account: "session", protection: .whenUnlocked))
        try t.device.lock(immediately: true)
        #expect(try keychain.copy(.password(account: "push")).count == 1)
        #expect(status { _ = try keychain.copy(.password(account: "session")) } == .interactionNotAllowed)
    }

    // Seed 000, the delete-on-read-failure trap.
    @Test("a read that fails while locked followed by a delete destroys a valid item")
    func deleteOnReadFailure() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "token"))
        try t.device.lock(immediately: true)
        let read = status { _ = try keychain.copy(.password(account: "token")) }
        #expect(read == .interactionNotAllowed)
        // The "can't read? must be corrupt" handler:
        try keychain.delete(ItemQuery(.genericPassword, attributes: [.account: .string("token")]))
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(status { _ = try keychain.copy(.password(account: "token")) } == .itemNotFound)
    }

    // Seed 000, the phantom mismatch.
    @Test("searching with another accessibility finds nothing while adding it again is a duplicate")
    func phantomMismatch() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "a", protection: .afterFirstUnlock))
        var query = ItemQuery.password(account: "a")
        query.protection = .whenUnlocked
        #expect(status { _ = try keychain.copy(query) } == .itemNotFound)
        #expect(status { try keychain.add(.password(account: "a", protection: .whenUnlocked)) } == .duplicateItem)
    }

    // Seed 000, trap 2: reinstall persistence.
    @Test("uninstalling wipes the sandbox but keeps keychain items; a reinstall finds the stale session")
    func reinstallPersistence() throws {
        let t = try TestDevice()
        try t.keychain().add(.password(account: "session", value: "old-user"))
        try t.device.sandbox(for: TestDevice.appID).set(true, forKey: "hasLaunched")
        try t.device.uninstall(bundleID: TestDevice.appID)
        #expect(throws: DeviceError.self) { try t.device.keychain(for: TestDevice.appID) }
        try t.device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        #expect(try t.device.sandbox(for: TestDevice.appID).defaults().isEmpty)
        #expect(try t.keychain().copy(.password(account: "session")).first?.data == Data("old-user".utf8))
    }

    // Seed 000, trap 3: pre-warming before first unlock.
    @Test("before first unlock UserDefaults reads back empty, not as an error")
    func preWarmEmptyDefaults() throws {
        let t = try TestDevice()
        let sandbox = try t.device.sandbox(for: TestDevice.appID)
        try sandbox.set("alice", forKey: "user")
        // UserDefaults is a real property list, plaintext on disk: a legacy store, not a keychain.
        let plist = t.directory.appendingPathComponent("apps/\(TestDevice.appID)/Library/Preferences/\(TestDevice.appID).plist")
        let onDisk = try PropertyListSerialization.propertyList(from: try Data(contentsOf: plist), format: nil) as? [String: Any]
        #expect(onDisk?["user"] as? String == "alice")
        try t.device.reboot()
        #expect(!t.device.isProtectedDataAvailable)
        #expect(try sandbox.defaults().isEmpty)
        #expect(throws: DeviceError.self) { try sandbox.set("bob", forKey: "user") }
        try t.device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try sandbox.string(forKey: "user") == "alice")
    }

    // Seed 000, trap 5: renaming the service orphans the old item.
    @Test("adding under a renamed service creates a second item and orphans the first")
    func orphanedAfterServiceRename() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "token", service: "OldServiceName", value: "v1"))
        // Version 2 of the app looks under the new service and finds nothing...
        #expect(status { _ = try keychain.copy(.password(account: "token", service: "com.mycompany.myapp")) } == .itemNotFound)
        // ...so it signs the user in again and stores a second item; the old one is an orphan.
        try keychain.add(.password(account: "token", service: "com.mycompany.myapp", value: "v2"))
        let all = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string("token")], matchLimit: .all, returning: .attributes))
        #expect(all.count == 2)
    }

    @Test("an update may change the service, Apple's way to rename without an orphan")
    func renameByUpdate() throws {
        let t = try TestDevice()
        let keychain = try t.keychain()
        try keychain.add(.password(account: "token", service: "OldServiceName", value: "v1"))
        try keychain.update(
            ItemQuery(.genericPassword, attributes: [.service: .string("OldServiceName")]),
            with: ItemChanges(attributes: [.service: .string("com.mycompany.myapp")]))
        #expect(try keychain.copy(.password(account: "token", service: "com.mycompany.myapp")).first?.data == Data("v1".utf8))
        #expect(status { _ = try keychain.copy(.password(account: "token", service: "OldServiceName")) } == .itemNotFound)
    }
}
