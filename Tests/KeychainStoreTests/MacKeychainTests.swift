import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

/// A Mac's two keychains, as Apple's SecItem shim routes calls between them (Protocol/profiles.md).
@Suite("Mac keychains")
struct MacKeychainTests {
    private static let other = "com.example.other"

    private struct Mac {
        let device: Device
        let directory: URL
        var app: Keychain { get throws { try device.keychain(for: TestDevice.appID) } }

        init(passcode: String? = "123456") throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-mac-\(UUID().uuidString)")
            device = try Device.create(
                at: directory, options: DeviceOptions(name: "MacBook", passcode: passcode, passcodeHashing: .minimum, profile: .mac),
                clock: ManualClock())
            if let passcode { try device.unlock(passcode: passcode) }
            try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
            try device.install(AppManifest(bundleID: MacKeychainTests.other, teamID: TestDevice.teamID))
        }

        func close() {
            device.powerOff()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    private func item(_ account: String, _ secret: String = "s", dataProtection: Bool? = nil) -> NewItem {
        NewItem(.genericPassword, attributes: [.account: .string(account)], data: Data(secret.utf8), useDataProtectionKeychain: dataProtection)
    }

    private func query(_ account: String? = nil, dataProtection: Bool? = nil, limit: MatchLimit? = nil, returning: ReturnOptions = [.data]) -> ItemQuery {
        ItemQuery(
            .genericPassword, attributes: account.map { [.account: .string($0)] } ?? [:], matchLimit: limit, returning: returning,
            useDataProtectionKeychain: dataProtection)
    }

    @Test("an add goes to the file-based keychain unless it says otherwise or needs the other; a plain search sees both")
    func routing() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        let fileBased = try keychain.add(item("token", "file"))
        #expect(fileBased.macKeychain == .fileBased && fileBased.protection == .afterFirstUnlock)
        let dataProtection = try keychain.add(item("token", "dp", dataProtection: true))
        #expect(dataProtection.macKeychain == nil && dataProtection.accessGroup == "\(TestDevice.teamID).\(TestDevice.appID)")
        let synced = try keychain.add(NewItem(.genericPassword, attributes: [.account: .string("synced")], data: Data(), synchronizable: true))
        #expect(synced.macKeychain == nil, "a synchronizable item needs the data protection keychain")

        // The same primary key twice: each keychain has its own.
        #expect(try keychain.copy(query("token", dataProtection: false)).map(\.data) == [Data("file".utf8)])
        #expect(try keychain.copy(query("token", dataProtection: true)).map(\.data) == [Data("dp".utf8)])
        // Both reached: one answer is the data protection keychain's; an array has both, folded.
        #expect(try keychain.copy(query("token")).map(\.data) == [Data("dp".utf8)])
        let both = try keychain.copy(query("token", limit: .all, returning: [.attributes]))
        #expect(both.map(\.macKeychain) == [nil, .fileBased], "\(both.map(\.accessGroup))")
        // An access group or accessibility given to the file-based keychain is dropped, not refused.
        let ignored = try keychain.add(
            NewItem(
                .genericPassword, attributes: [.account: .string("ignored")], data: Data(), accessGroup: "\(TestDevice.teamID).nowhere",
                protection: .whenUnlockedThisDeviceOnly, useDataProtectionKeychain: false))
        #expect(ignored.macKeychain == .fileBased && ignored.protection == .afterFirstUnlock)
    }

    @Test("access control without kSecUseDataProtectionKeychain goes to the data protection keychain; with it false, it is dropped")
    func accessControl() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        let control = try AccessControl(protection: .whenUnlockedThisDeviceOnly, flags: [.userPresence])
        var guarded = item("guarded")
        guarded.accessControl = control
        #expect(try keychain.add(guarded).macKeychain == nil)
        guarded.attributes[.account] = .string("unguarded")
        guarded.useDataProtectionKeychain = false
        let dropped = try keychain.add(guarded)
        #expect(dropped.macKeychain == .fileBased && dropped.accessControl == nil)
        // No prompt guards it: read with no interaction allowed.
        var noPrompt = query("unguarded")
        noPrompt.authentication.interactionAllowed = false
        #expect(try keychain.copy(noPrompt).first?.data == Data("s".utf8))
    }

    @Test("file-based items open once the user has logged in, whatever the screen lock; data protection class A items do not")
    func lockStates() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        try keychain.add(item("login"))
        try keychain.add(
            NewItem(
                .genericPassword, attributes: [.account: .string("classA")], data: Data("a".utf8), protection: .whenUnlocked,
                useDataProtectionKeychain: true))
        try mac.device.lock(immediately: true)
        #expect(try keychain.copy(query("login")).first?.data == Data("s".utf8))
        #expect(throws: KeychainError.self) { try keychain.copy(query("classA", dataProtection: true)) }
        try mac.device.reboot()
        let beforeLogin = #expect(throws: KeychainError.self) { try keychain.copy(query("login", dataProtection: false)) }
        #expect(beforeLogin?.status == .interactionNotAllowed, "before the first login the login keychain is locked")
    }

    @Test("a file-based update or delete touches the first match unless kSecMatchLimit says otherwise; the data protection one touches every match")
    func matchLimits() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        for n in 1...3 {
            try keychain.add(item("file-\(n)"))
            try keychain.add(item("dp-\(n)", dataProtection: true))
        }
        #expect(try keychain.update(query(dataProtection: false, returning: []), with: ItemChanges(attributes: [.label: .string("x")])) == 1)
        #expect(try keychain.update(query(dataProtection: true, returning: []), with: ItemChanges(attributes: [.label: .string("x")])) == 3)
        #expect(try keychain.delete(query(dataProtection: false, returning: [])) == 1)
        #expect(try keychain.delete(query(dataProtection: false, limit: .all, returning: [])) == 2)
        // A delete without the key reaches both: the data protection items go with it.
        try keychain.add(item("file-4"))
        #expect(try keychain.delete(query(returning: [])) == 4)
        #expect(throws: KeychainError.self) { try keychain.copy(query(limit: .all, returning: [.attributes])) }
    }

    @Test("the file-based keychain returns no data for kSecMatchLimitAll on passwords: errSecParam")
    func returnDataForAll() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        try keychain.add(item("a"))
        let refused = #expect(throws: KeychainError.self) { try keychain.copy(query(dataProtection: false, limit: .all)) }
        #expect(refused?.status == .param)
        #expect(try keychain.copy(query(dataProtection: false, limit: .all, returning: [.attributes])).count == 1)
        try keychain.add(item("b", dataProtection: true))
        // Both reached: the file-based refusal gives way to the data protection answer.
        #expect(try keychain.copy(query(limit: .all)).map(\.data) == [Data("s".utf8)])
    }

    @Test("an app without a keychain entitlement still has the file-based keychain; another app does not see its items")
    func entitlementsAndApps() throws {
        let mac = try Mac()
        defer { mac.close() }
        try mac.device.install(AppManifest(bundleID: "com.example.unsigned", teamID: TestDevice.teamID, hasKeychainEntitlement: false))
        let unsigned = try mac.device.keychain(for: "com.example.unsigned")
        try unsigned.add(item("cli"))
        #expect(try unsigned.copy(query("cli")).first?.data == Data("s".utf8))
        let missing = #expect(throws: KeychainError.self) { try unsigned.add(item("dp", dataProtection: true)) }
        #expect(missing?.status == .missingEntitlement)
        let other = try mac.device.keychain(for: Self.other)
        #expect(throws: KeychainError.self) { try other.copy(query("cli")) }
    }

    @Test("an update that makes a file-based item synchronizable moves it into the data protection keychain, as Apple's shim does")
    func madeSynchronizable() throws {
        let mac = try Mac()
        defer { mac.close() }
        let keychain = try mac.app
        try keychain.add(item("token", "t0k"))
        try keychain.add(item("other"))
        let changed = try keychain.update(query("token", dataProtection: false, returning: []), with: ItemChanges(synchronizable: true))
        #expect(changed == 1)
        #expect(throws: KeychainError.self) { try keychain.copy(query("token", dataProtection: false)) }
        var synced = query("token", dataProtection: true, returning: [.data, .attributes])
        synced.synchronizable = .yes
        let moved = try #require(try keychain.copy(synced).first)
        #expect(moved.data == Data("t0k".utf8) && moved.synchronizable && moved.macKeychain == nil)
        #expect(try keychain.copy(query("other", dataProtection: false)).count == 1, "only the match moved")
    }

    @Test("an iPhone ignores kSecUseDataProtectionKeychain, as Apple's other platforms do")
    func iphoneIgnoresTheKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-phone-\(UUID().uuidString)")
        let device = try Device.create(at: directory, options: DeviceOptions(name: "Phone", passcodeHashing: .minimum), clock: ManualClock())
        defer {
            device.powerOff()
            try? FileManager.default.removeItem(at: directory)
        }
        try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        let keychain = try device.keychain(for: TestDevice.appID)
        #expect(try keychain.add(item("a", dataProtection: false)).macKeychain == nil)
        #expect(try keychain.copy(query("a", dataProtection: true)).count == 1)
        #expect(try device.status().profile == .iphone)
    }
}
