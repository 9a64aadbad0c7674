import Foundation
import KeyferrySecurity
import KeyferryTesting
import Testing

/// The seeds' own calls of `UserDefaults.standard`, `FileManager.default` and
/// `Data.write(to:options:)`, unchanged, on a simulated device: the module's one
/// `DeviceFoundation.swift` sends them to the app's sandbox, so they meet lock states,
/// backups and uninstall as on a phone.
@Suite("The app's own Foundation calls reach the device")
struct SeedFoundationTests {
    let phone: SimulatedDevice
    let app: KeyferryContext

    init() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.pixar.tracker")
    }

    private func documents(_ name: String) throws -> URL {
        try #require(app.fileManager.urls(for: .documentDirectory, in: .userDomainMask).first).appendingPathComponent(name)
    }

    @Test("Seed 002's token in UserDefaults.standard and credentials file in Documents are the app's: backed up, gone with the app")
    func credentialsInTheWrongPlaces() throws {
        let token = try app.run { try storeCredentialsInTheWrongPlaces(authToken: "tok-123", credentials: Credentials(username: "ada", password: "pw")) }
        #expect(token == "tok-123")
        #expect(app.userDefaults.string(forKey: "session_token") == "tok-123", "in the device's property list")
        #expect(Foundation.UserDefaults.standard.string(forKey: "session_token") == nil, "not the host's")
        let file = try documents("credentials.json")
        let saved = try #require(app.fileManager.contents(atPath: file.path))
        #expect(try JSONDecoder().decode(Credentials.self, from: saved).username == "ada")

        let (newPhone, _) = try phone.restoreBackupOntoNewDevice()
        let restored = newPhone.app("com.pixar.tracker")
        #expect(restored.userDefaults.string(forKey: "session_token") == "tok-123", "UserDefaults travel in a backup, as the seed warns")
        #expect(restored.fileManager.contents(atPath: file.path.replacingOccurrences(of: phone.directory.path, with: newPhone.directory.path)) == saved)

        try phone.uninstall("com.pixar.tracker")
        let reinstalled = try phone.install("com.pixar.tracker")
        #expect(reinstalled.run { UserDefaults.standard.string(forKey: "session_token") } == nil, "wiped with the app")
        #expect(reinstalled.fileManager.contents(atPath: file.path) == nil)
    }

    @Test("Seed 002's and seed 000's first-launch checks see a reinstall: UserDefaults go with the app, keychain items stay")
    func firstLaunchAfterReinstall() async throws {
        try app.run { try KeychainManager.save(Data("old".utf8), service: "com.pixar.tracker", account: "credentials") }
        app.run { handleAppLaunch() }
        #expect(app.run { (try? KeychainManager.read(service: "com.pixar.tracker", account: "credentials")) == nil }, "a first launch clears them")
        try app.run { try KeychainManager.save(Data("new".utf8), service: "com.pixar.tracker", account: "credentials") }
        app.run { handleAppLaunch() }
        #expect(app.run { try? KeychainManager.read(service: "com.pixar.tracker", account: "credentials") } == Data("new".utf8), "not on later launches")

        try phone.uninstall("com.pixar.tracker")
        let reinstalled = try phone.install("com.pixar.tracker")
        #expect(
            reinstalled.run { try? KeychainManager.read(service: "com.pixar.tracker", account: "credentials") } == Data("new".utf8), "items outlive the app")
        await reinstalled.run { await FirstLaunchGuard().performCleanupIfNeeded() }
        #expect(reinstalled.run { try? KeychainManager.read(service: "com.pixar.tracker", account: "credentials") } == nil, "seed 000's guard wiped them")
        #expect(reinstalled.run { UserDefaults.standard.bool(forKey: "com.myapp.hasCompletedFirstLaunch") })
    }

    @Test("Seed 000's migration before first unlock finds nothing to move, and its data is still there after the unlock")
    func migrationWhilePrewarmed() async throws {
        app.run { UserDefaults.standard.set("legacy-token", forKey: "authToken") }
        try phone.reboot()
        let migrator = AtomicMigrator(keychain: DeviceKeychain())
        let early = await app.run { await migrator.migrateUserDefaultsKeys(["authToken"], service: "com.myapp") }
        #expect(early.map(\.succeeded) == [true], "the seed's trap 3: an empty read looks like nothing to migrate")
        #expect(app.run { (try? KeychainManager.read(service: "com.myapp", account: "authToken")) == nil })

        try phone.unlock()
        let later = await app.run { await migrator.migrateUserDefaultsKeys(["authToken"], service: "com.myapp") }
        #expect(later.map(\.succeeded) == [true])
        #expect(app.run { try? KeychainManager.read(service: "com.myapp", account: "authToken") } == Data("legacy-token".utf8))
        #expect(app.run { UserDefaults.standard.string(forKey: "authToken") } == nil, "deleted only after the verified write")
    }

    @Test("Data.write with .completeFileProtection cannot write while locked; class B creates new files while locked but reads none")
    func fileProtectionOptions() throws {
        let vault = try documents("vault.bin")
        let inbox = try documents("inbox.bin")
        try app.run { try Data("sealed".utf8).write(to: vault, options: .completeFileProtection) }
        try phone.lock()
        app.run {
            #expect(throws: CocoaError.self) { try Data("again".utf8).write(to: vault, options: .completeFileProtection) }
            #expect(FileManager.default.contents(atPath: vault.path) == nil)
            #expect((try? Data("mail".utf8).write(to: inbox, options: .completeFileProtectionUnlessOpen)) != nil, "a new class B file")
            #expect(FileManager.default.contents(atPath: inbox.path) == nil, "closed, it reads only while unlocked")
            #expect(throws: CocoaError.self) { try Data("more".utf8).write(to: inbox, options: .completeFileProtectionUnlessOpen) }
        }
        #expect(app.lastFailure?.contains("current lock state") == true, "\(app.lastFailure ?? "")")
        try phone.unlock()
        app.run {
            #expect(FileManager.default.contents(atPath: vault.path) == Data("sealed".utf8))
            #expect(FileManager.default.contents(atPath: inbox.path) == Data("mail".utf8))
            #expect(throws: CocoaError.self) { try Data("x".utf8).write(to: vault, options: .withoutOverwriting) }
        }
    }

    @Test("removePersistentDomain(forName:) of the app's bundle ID empties its defaults on the device, as the seed's logout does")
    func removePersistentDomain() throws {
        app.run {
            UserDefaults.standard.set("t", forKey: "authToken")
            UserDefaults.standard.set(true, forKey: "onboarded")
            UserDefaults.standard.removePersistentDomain(forName: "com.other.app")
        }
        #expect(app.userDefaults.string(forKey: "authToken") == "t", "another app's domain is not this app's to remove")
        app.run { UserDefaults.standard.removePersistentDomain(forName: "com.pixar.tracker") }
        #expect(app.userDefaults.dictionaryRepresentation().isEmpty)
    }

    @Test("Without a context the same calls are the host's, as Foundation's")
    func hostWithoutContext() throws {
        #expect(KeyferryContext.current == nil)
        #expect(
            FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)
                == Foundation.FileManager.default.urls(for: .documentDirectory, in: .userDomainMask))
        let scratch = Foundation.FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-overlay-\(UUID().uuidString)")
        defer { try? Foundation.FileManager.default.removeItem(at: scratch) }
        try Data("host".utf8).write(to: scratch, options: .completeFileProtection)
        #expect(Foundation.FileManager.default.contents(atPath: scratch.path) == Data("host".utf8))
    }
}

@Test("docs/swift.md gives users this target's DeviceFoundation.swift, line for line")
func theDocumentedFileIsTheTestedOne() throws {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let guide = try String(contentsOf: here.appendingPathComponent("../../docs/swift.md"), encoding: .utf8)
    let tested = try String(contentsOf: here.appendingPathComponent("Samples/DeviceFoundation.swift"), encoding: .utf8)
    func code(_ text: Substring) -> [Substring] { text.split(separator: "\n").filter { !$0.hasPrefix("//") } }
    let block = try #require(guide.components(separatedBy: "```swift\n").first { $0.contains("typealias UserDefaults = DeviceUserDefaults") })
    #expect(code(block.prefix { _ in true }.split(separator: "```").first ?? "") == code(tested[...]))
}

/// The user's own implementation of seed 000's protocol, on Keychain Services.
actor DeviceKeychain: MigrationKeychainProtocol {
    func save(_ data: Data, service: String, account: String, accessible: CFString) throws {
        try KeychainManager.save(data, service: service, account: account)
    }

    func read(service: String, account: String) throws -> Data { try KeychainManager.read(service: service, account: account) }
    func delete(service: String, account: String) throws { try KeychainManager.delete(service: service, account: account) }
    func deleteAll() {}
}
