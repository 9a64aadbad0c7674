import Foundation
import KeyferryTesting
import Testing

/// The app's world beside the keychain, as its code reaches it through the context: its
/// UserDefaults and Documents with iOS's protection, UIApplication's protected-data state and
/// notifications, and os_log.
@Suite("The app's sandbox, protected data and logs")
struct AppWorldTests {
    let phone: SimulatedDevice
    let app: KeyferryContext

    init() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.myapp")
    }

    @Test("UserDefaults are the app's property list: before first unlock only the registered defaults show, and a write is lost, as on iOS")
    func userDefaults() throws {
        let defaults = app.userDefaults
        defaults.register(defaults: ["theme": "light"])
        defaults.set("alice", forKey: "signedInUser")
        defaults.set(3, forKey: "launches")
        #expect(defaults.string(forKey: "signedInUser") == "alice" && defaults.integer(forKey: "launches") == 3)
        #expect(app.userDefaults.string(forKey: "signedInUser") == "alice", "kept in the device's sandbox, not in this object")

        try phone.reboot()
        #expect(defaults.string(forKey: "signedInUser") == nil, "pre-warmed before first unlock: the plist cannot be read")
        #expect(defaults.string(forKey: "theme") == "light")
        defaults.set("bob", forKey: "signedInUser")
        #expect(app.lastFailure?.contains("before first unlock") == true, "\(app.lastFailure ?? "")")
        try phone.unlock()
        #expect(defaults.string(forKey: "signedInUser") == "alice", "the write before first unlock was lost")
        defaults.removeObject(forKey: "signedInUser")
        #expect(defaults.object(forKey: "signedInUser") == nil)
    }

    @Test("Documents with file protection: a complete file cannot be read or written while locked; class C can once unlocked once")
    func files() throws {
        let files = app.fileManager
        let documents = try #require(files.urls(for: .documentDirectory, in: .userDomainMask).first)
        let index = documents.appendingPathComponent("Mail/index.db").path
        let drafts = documents.appendingPathComponent("drafts.txt").path
        #expect(files.createFile(atPath: index, contents: Data("mail".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
        #expect(files.createFile(atPath: drafts, contents: Data("draft".utf8), attributes: nil))

        try phone.lock()
        #expect(files.contents(atPath: index) == nil)
        #expect(!files.createFile(atPath: index, contents: Data("new".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
        #expect(files.contents(atPath: drafts) == Data("draft".utf8), "completeUntilFirstUserAuthentication, the default")
        #expect(files.createFile(atPath: drafts, contents: Data("draft 2".utf8), attributes: nil))
        try phone.unlock()
        #expect(files.contents(atPath: index) == Data("mail".utf8))
        try files.removeItem(atPath: index)
        #expect(files.contents(atPath: index) == nil)
    }

    @Test("UIApplication.isProtectedDataAvailable follows the lock, and its notifications are posted as it changes")
    func protectedData() async throws {
        let phone = try SimulatedDevice(gracePeriod: 10)
        let app = try phone.install("com.myapp")
        let seen = Notes()
        let names = [UIApplication.protectedDataWillBecomeUnavailableNotification, UIApplication.protectedDataDidBecomeAvailableNotification]
        let observers = names.map { name in
            NotificationCenter.default.addObserver(forName: name, object: phone, queue: nil) { seen.add($0.name.rawValue) }
        }
        defer { observers.forEach(NotificationCenter.default.removeObserver) }
        #expect(await app.run { await MainActor.run { UIApplication.shared.isProtectedDataAvailable } })
        try phone.lock(immediately: false)
        #expect(await app.run { await MainActor.run { UIApplication.shared.isProtectedDataAvailable } }, "the grace period")
        phone.advanceClock(by: 60)
        #expect(await app.run { await MainActor.run { !UIApplication.shared.isProtectedDataAvailable } })
        try phone.unlock()
        #expect(seen.all == ["UIApplicationProtectedDataWillBecomeUnavailable", "UIApplicationProtectedDataDidBecomeAvailable"])
    }

    @Test("the seed's first-launch guard, run while pre-warmed: it waits for protected data, logs why, and cleans up once the phone is unlocked")
    func firstLaunchGuard() async throws {
        let stale: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "stale", kSecValueData: Data("old".utf8)]
        app.run { #expect(SecItemAdd(stale as CFDictionary, nil) == errSecSuccess) }
        try phone.reboot()
        let guardian = FirstLaunchGuard(defaults: app.userDefaults)
        let cleanup = Task { await app.run { await guardian.performCleanupIfNeeded() } }
        // The guard has logged that it waits before the phone is unlocked.
        while !app.loggedMessages.contains(where: { $0.contains("waits for first unlock") }) { await Task.yield() }
        #expect(app.loggedMessages.first == "info: [com.myapp:FirstLaunch] Protected data unavailable; cleanup waits for first unlock", "\(app.loggedMessages)")
        try phone.unlock()
        await cleanup.value
        let status = app.run { SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "stale"] as CFDictionary, nil) }
        #expect(status == errSecItemNotFound, "the stale item of a previous install is gone")
        // The seed listens for any object's notification, and other suites' phones in this
        // process unlock too: one may wake the guard before this phone is unlocked, when its
        // defaults cannot be written. The app's next launch, unlocked, finishes the job then.
        if !app.userDefaults.bool(forKey: "com.myapp.hasCompletedFirstLaunch") { await app.run { await guardian.performCleanupIfNeeded() } }
        #expect(app.userDefaults.bool(forKey: "com.myapp.hasCompletedFirstLaunch"))
        #expect(FirstLaunchGuard.accessControl() != nil)
    }
}

/// Notifications seen, from whichever thread posts them.
private final class Notes: @unchecked Sendable {
    private let lock = NSLock()
    private var names: [String] = []
    func add(_ name: String) { lock.withLock { names.append(name) } }
    var all: [String] { lock.withLock { names } }
}
