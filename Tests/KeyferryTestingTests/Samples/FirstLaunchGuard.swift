// App code as the seeds write it (000: first-launch cleanup with a protected-data guard, and
// os_log), for Apple's platforms. On Linux only the imports differ: UIKit's UIApplication,
// os_log and Keychain Services all come from KeyferrySecurity. The UserDefaults are handed in
// (`.standard` on a phone), so that a test gives the app's own.
#if canImport(UIKit)
import UIKit
import Security
import os.log
#else
import KeyferrySecurity
#endif
import Foundation
import KeychainModel

actor FirstLaunchGuard {
    private let hasRunKey = "com.myapp.hasCompletedFirstLaunch"
    private let defaults: UserDefaults

    init(defaults: UserDefaults = .standard) {
        self.defaults = defaults
    }

    /// Call at the very start of app lifecycle, before SDK initialization.
    func performCleanupIfNeeded() async {
        let isSubsequentRun = defaults.bool(forKey: hasRunKey)
        guard !isSubsequentRun else { return }

        // iOS 15+ pre-warming guard: device may still be locked
        guard await isProtectedDataAvailable() else {
            os_log(.info, log: .launch, "Protected data unavailable; cleanup waits for %{public}@", "first unlock")
            await waitForProtectedData()
            return
        }
        deleteAllKeychainItems()
        defaults.set(true, forKey: hasRunKey)
    }

    private func deleteAllKeychainItems() {
        let classes: [CFString] = [
            kSecClassGenericPassword, kSecClassInternetPassword,
            kSecClassCertificate, kSecClassKey, kSecClassIdentity,
        ]
        for itemClass in classes {
            let query: NSDictionary = [
                kSecClass: itemClass,
                kSecAttrSynchronizable: kSecAttrSynchronizableAny,
            ]
            SecItemDelete(query)
        }
    }

    private func isProtectedDataAvailable() async -> Bool {
        await MainActor.run {
            UIApplication.shared.isProtectedDataAvailable
        }
    }

    private func waitForProtectedData() async {
        await withCheckedContinuation { continuation in
            nonisolated(unsafe) var observer: NSObjectProtocol?
            observer = NotificationCenter.default.addObserver(
                forName: UIApplication.protectedDataDidBecomeAvailableNotification,
                object: nil, queue: nil
            ) { _ in
                NotificationCenter.default.removeObserver(observer!)
                continuation.resume()
            }
        }
        deleteAllKeychainItems()
        defaults.set(true, forKey: hasRunKey)
    }

    /// Seed 001's helper: the accessibility as a `CFTypeRef`, as Security's API types it.
    static func accessControl(_ protection: CFTypeRef = kSecAttrAccessibleWhenUnlockedThisDeviceOnly) -> SecAccessControl? {
        SecAccessControlCreateWithFlags(nil, protection, .userPresence, nil)
    }
}

private extension OSLog {
    static let launch = OSLog(subsystem: Bundle.main.bundleIdentifier ?? "com.myapp", category: "FirstLaunch")
}
