// App code as it is written for Apple's platforms, in the style of the seeds: moving secrets
// out of UserDefaults into the keychain. Only the import differs on Linux.
#if canImport(Security)
import Security
#else
import KeyferrySecurity
#endif
import Foundation

/// Read, write, verify, delete: the legacy value goes only after the keychain holds it, so a
/// failure or a kill at any point leaves it in one place or the other. Failed keys stay in
/// UserDefaults for the next launch.
actor AtomicMigrator {
    struct MigrationResult: Sendable {
        let key: String
        let succeeded: Bool
    }

    enum MigrationError: Error { case verificationFailed(key: String) }

    private let keychain: KeychainManager
    private let defaults: UserDefaults

    init(keychain: KeychainManager, defaults: UserDefaults) {
        self.keychain = keychain
        self.defaults = defaults
    }

    func migrateUserDefaultsKeys(_ keys: [String]) async -> [MigrationResult] {
        var results: [MigrationResult] = []
        for key in keys {
            do {
                // 1. Read from legacy storage.
                guard let legacyValue = defaults.string(forKey: key) else {
                    results.append(MigrationResult(key: key, succeeded: true))
                    continue
                }
                let data = Data(legacyValue.utf8)
                // 2. Write to the keychain (add-or-update handles duplicates).
                try await keychain.save(data, for: key)
                // 3. Verify by reading back.
                guard try await keychain.load(for: key) == data else { throw MigrationError.verificationFailed(key: key) }
                // 4. Delete the legacy value only after a verified write.
                defaults.removeObject(forKey: key)
                results.append(MigrationResult(key: key, succeeded: true))
            } catch {
                results.append(MigrationResult(key: key, succeeded: false))
            }
        }
        return results
    }
}

/// The seeds' anti-pattern: the legacy value is deleted before the keychain write, whose
/// status is never looked at.
func dangerousMigration(_ keys: [String], defaults: UserDefaults) {
    for key in keys {
        guard let value = defaults.string(forKey: key) else { continue }
        defaults.removeObject(forKey: key)
        let query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: "com.myapp",
            kSecAttrAccount as String: key,
            kSecValueData as String: value.data(using: .utf8)!,
        ]
        _ = SecItemAdd(query as CFDictionary, nil)
    }
}
