import Foundation
import KeychainModel
import KeyferryTesting
import Testing

/// KeyferryTesting as a user's test suite sees it: devices, their apps, and what happens to
/// secrets stored the ordinary way (Samples/KeychainManager.swift).
@Suite("KeyferryTesting")
struct SimulatedDeviceTests {
    let phone: SimulatedDevice
    let app: KeyferryContext
    let keychain = KeychainManager(service: "com.example.notes")

    init() throws {
        phone = try SimulatedDevice(gracePeriod: 10)
        app = try phone.install("com.example.notes")
    }

    func save(_ value: String, _ key: String, _ accessibility: CFString = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly) async throws {
        try await app.run { try await keychain.save(Data(value.utf8), for: key, accessibility: accessibility) }
    }

    func load(_ key: String, on device: SimulatedDevice? = nil) async -> Result<String?, KeychainManagerError> {
        let app = device?.app("com.example.notes") ?? self.app
        return await app.run {
            do {
                return .success(try await keychain.load(for: key).map { String(decoding: $0, as: UTF8.self) })
            } catch {
                return .failure(error as! KeychainManagerError)
            }
        }
    }

    @Test("lock with a grace period, the clock, a reboot before first unlock")
    func lockStates() async throws {
        try await save("fg", "foreground", kSecAttrAccessibleWhenUnlocked)
        try await save("bg", "background")
        try phone.lock(immediately: false)
        #expect(await load("foreground") == .success("fg"), "within the grace period")
        phone.advanceClock(by: 11)
        #expect(await load("foreground") == .failure(KeychainManagerError(status: errSecInteractionNotAllowed)))
        #expect(await load("background") == .success("bg"))
        try phone.reboot()
        #expect(await load("background") == .failure(KeychainManagerError(status: errSecInteractionNotAllowed)))
        try phone.unlock()
        #expect(await load("foreground") == .success("fg"))
        #expect(throws: (any Error).self) { try phone.unlock(passcode: "000000") }
    }

    @Test("removing the passcode deletes WhenPasscodeSet items; a new passcode answers prompts")
    func passcodeChanges() async throws {
        try await save("vault", "vault", kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly)
        try phone.setPasscode("654321")
        #expect(phone.passcode == "654321")
        try phone.lock()
        try phone.unlock()
        #expect(await load("vault") == .success("vault"))
        try phone.removePasscode()
        #expect(await load("vault") == .success(nil))
        #expect(phone.passcode == nil)
    }

    @Test("a backup restored onto a new device: ThisDeviceOnly items are dropped, with the reason; the rest come back")
    func backupOntoNewDevice() async throws {
        try await save("device-bound", "session")
        try await save("portable", "account", kSecAttrAccessibleAfterFirstUnlock)
        let (newPhone, report) = try phone.restoreBackupOntoNewDevice()
        #expect(await load("account", on: newPhone) == .success("portable"))
        #expect(await load("session", on: newPhone) == .success(nil))
        let dropped = report.items.filter { !$0.restored }
        #expect(dropped.map(\.reason) == [.deviceBound])
        #expect(dropped.first?.name?.contains("session") == true, "\(dropped)")

        let (unencrypted, _) = try phone.restoreBackupOntoNewDevice(.unencrypted)
        #expect(await load("account", on: unencrypted) == .success(nil), "an unencrypted backup's items stay with their device")
    }

    @Test("a sync circle: synchronizable items reach the other device; ThisDeviceOnly ones never do")
    func syncCircle() async throws {
        let ipad = try SimulatedDevice(name: "Test iPad")
        try ipad.install("com.example.notes")
        let circle = try await SyncCircle([phone, ipad])
        await app.run {
            for (account, accessibility) in [("synced", kSecAttrAccessibleAfterFirstUnlock), ("stays", kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly)] {
                #expect(
                    SecItemAdd(
                        [
                            kSecClass: kSecClassGenericPassword, kSecAttrService: "com.example.notes", kSecAttrAccount: account,
                            kSecValueData: Data(account.utf8), kSecAttrSynchronizable: true,
                            kSecAttrAccessible: accessibility,
                        ] as CFDictionary, nil) == errSecSuccess)
            }
        }
        try await circle.sync()
        let onIPad = ipad.app("com.example.notes").run {
            var result: CFTypeRef?
            let status = SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrSynchronizable: kSecAttrSynchronizableAny,
                    kSecReturnAttributes: true, kSecMatchLimit: kSecMatchLimitAll,
                ] as CFDictionary, &result)
            return (status, (result as? [[String: Any]])?.compactMap { $0[kSecAttrAccount as String] as? String })
        }
        #expect(onIPad.0 == errSecSuccess)
        #expect(onIPad.1 == ["synced"])
        // The audit names the item that will never sync.
        #expect(try phone.traps().map(\.trap) == [.synchronizableThisDeviceOnly])
    }

    @Test("the next calls of an operation fail with a chosen status; then the device answers again")
    func faults() async throws {
        app.failNext(.copyMatching, times: 2, with: errSecInteractionNotAllowed)
        try await save("v", "k")
        #expect(await load("k") == .failure(KeychainManagerError(status: errSecInteractionNotAllowed)))
        #expect(await load("k") == .failure(KeychainManagerError(status: errSecInteractionNotAllowed)))
        #expect(await load("k") == .success("v"))
    }

    @Test("a launch runs the app's actors on its own thread; a kill stops them between two calls")
    func launchAndKill() async throws {
        let finished = try await app.launch {
            try await keychain.save(Data("1".utf8), for: "a")
            return "done"
        }
        guard case .finished("done") = finished else {
            Issue.record("\(finished)")
            return
        }

        // What the killed launch used dies with it: its actor is made inside.
        let killed = try await app.launch(killAfterCalls: 1) {
            let keychain = KeychainManager(service: "com.example.notes")
            try await keychain.save(Data("2".utf8), for: "b")
            try await keychain.save(Data("3".utf8), for: "c")
            return "not reached"
        }
        guard case .killed(afterCalls: 1) = killed else {
            Issue.record("\(killed)")
            return
        }
        #expect(try await app.run { try await keychain.allAccounts() }.sorted() == ["a", "b"])
    }

    @Test("requireNoTraps fails with each trap's file and line")
    func trapAssertion() throws {
        try phone.requireNoTraps()
        let line = #line + 2
        app.run {
            SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "x", kSecAttrAccessible: kSecAttrAccessibleAlways] as CFDictionary, nil)
        }
        let error = try #require(throws: TrapsFound.self) { try phone.requireNoTraps() }
        #expect(error.description.contains("KeyferryTestingTests/SimulatedDeviceTests.swift:\(line): deprecated Always accessibility"))
    }

    @Test("the device's directory goes with the value")
    func removedWhenReleased() throws {
        var device: SimulatedDevice? = try SimulatedDevice()
        let directory = try #require(device?.directory)
        #expect(FileManager.default.fileExists(atPath: directory.path))
        device = nil
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }
}
