import Foundation
import KeychainModel
import KeyferryTesting
import Testing

/// The seeds' UserDefaults-to-keychain migrations (Samples/LegacyMigration.swift), failed and
/// killed at every point on a simulated device.
@Suite("UserDefaults to keychain migration")
struct MigrationTests {
    let phone: SimulatedDevice
    let app: KeyferryContext
    let legacy = ["authToken": "t0k3n", "refreshToken": "r3fr3sh"]

    init() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.myapp")
    }

    /// A UserDefaults suite of its own, holding the legacy values, as the app's plist does.
    /// (Apple's UserDefaults is Sendable; Linux Foundation's is not yet marked so.)
    func legacyDefaults() -> UserDefaults {
        let suite = "keyferry-migration-\(UUID().uuidString)"
        let defaults = UserDefaults(suiteName: suite)!
        defaults.removePersistentDomain(forName: suite)
        for (key, value) in legacy { defaults.set(value, forKey: key) }
        return defaults
    }

    /// Where each legacy value is now: UserDefaults, the keychain, both, or nowhere.
    func whereabouts(_ defaults: UserDefaults, service: String) async throws -> [String: String] {
        let keychain = KeychainManager(service: service)
        var out: [String: String] = [:]
        for (key, value) in legacy {
            let inDefaults = defaults.string(forKey: key) == value
            let inKeychain = try await app.run { try await keychain.load(for: key) } == Data(value.utf8)
            out[key] = inDefaults && inKeychain ? "both" : inDefaults ? "defaults" : inKeychain ? "keychain" : "lost"
        }
        return out
    }

    @Test("read-write-verify-delete: killed after any number of calls, nothing is lost, and the next launch finishes")
    func atomicMigrationSurvivesKills() async throws {
        let keys = legacy.keys.sorted()
        var killedAt: [Int] = []
        for limit in 0... {
            nonisolated(unsafe) let defaults = legacyDefaults()
            let service = "com.myapp.\(limit)"
            let first = try await app.launch(killAfterCalls: limit) {
                await AtomicMigrator(keychain: KeychainManager(service: service), defaults: defaults).migrateUserDefaultsKeys(keys)
            }
            guard case .killed(let calls) = first else { break }
            killedAt.append(calls)
            let afterKill = try await whereabouts(defaults, service: service)
            #expect(!afterKill.values.contains("lost"), "killed after \(calls) calls: \(afterKill)")

            let second = try await app.launch {
                await AtomicMigrator(keychain: KeychainManager(service: service), defaults: defaults).migrateUserDefaultsKeys(keys)
            }
            guard case .finished(let results) = second else {
                Issue.record("the relaunch was killed")
                return
            }
            #expect(results.allSatisfy { $0.succeeded })
            #expect(try await whereabouts(defaults, service: service) == ["authToken": "keychain", "refreshToken": "keychain"])
        }
        // Two calls per key: the add, and the read that verifies it.
        #expect(killedAt == [0, 1, 2, 3])
        try phone.requireNoTraps()
    }

    @Test("delete-then-write: killed before its first add, a token is gone for good")
    func dangerousMigrationLosesData() async throws {
        nonisolated(unsafe) let defaults = legacyDefaults()
        let outcome = try await app.launch(killAfterCalls: 0) { dangerousMigration(["authToken", "refreshToken"], defaults: defaults) }
        guard case .killed(afterCalls: 0) = outcome else {
            Issue.record("not killed: \(outcome)")
            return
        }
        _ = try await app.launch { dangerousMigration(["authToken", "refreshToken"], defaults: defaults) }
        #expect(try await whereabouts(defaults, service: "com.myapp") == ["authToken": "lost", "refreshToken": "keychain"])
        // And the audit names the add that sets no accessibility.
        #expect(try phone.traps().map(\.trap) == [.noAccessibilityOnAdd])
    }

    @Test("a keychain that fails (a locked device, a full disk) leaves the legacy data in place for the next launch")
    func failedWriteKeepsLegacyData() async throws {
        nonisolated(unsafe) let defaults = legacyDefaults()
        app.failNext(.add, with: errSecInteractionNotAllowed)
        let results = await app.run {
            await AtomicMigrator(keychain: KeychainManager(service: "com.myapp"), defaults: defaults).migrateUserDefaultsKeys(["authToken", "refreshToken"])
        }
        #expect(results.map(\.succeeded) == [false, true])
        #expect(try await whereabouts(defaults, service: "com.myapp") == ["authToken": "defaults", "refreshToken": "keychain"])
    }

    @Test("before first unlock (a pre-warmed launch) the write fails -25308 and nothing moves")
    func beforeFirstUnlock() async throws {
        nonisolated(unsafe) let defaults = legacyDefaults()
        try phone.reboot()
        let results = await app.run {
            await AtomicMigrator(keychain: KeychainManager(service: "com.myapp"), defaults: defaults).migrateUserDefaultsKeys(["authToken"])
        }
        #expect(results.map(\.succeeded) == [false])
        #expect(app.lastFailure?.contains("first unlock") == true, "\(app.lastFailure ?? "")")
        try phone.unlock()
        #expect(try await whereabouts(defaults, service: "com.myapp")["authToken"] == "defaults")
    }
}
