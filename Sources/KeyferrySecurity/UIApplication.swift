public import Foundation

/// What keychain code reads of UIKit's `UIApplication`, on Linux where UIKit is absent: whether
/// protected data is available, and the two notifications of its changes. A file that imports
/// UIKit for these takes `import KeyferrySecurity` instead. The notifications are posted by
/// `KeyferryTesting`'s `SimulatedDevice` when a lock change it makes crosses the line (a lock,
/// the end of a grace period, an unlock, a reboot).
@MainActor
public final class UIApplication {
    public static let shared = UIApplication()

    /// Whether files with complete protection (and class A keychain items) can be read now, on
    /// the current context's device.
    public var isProtectedDataAvailable: Bool { KeyferryContext.current?.isProtectedDataAvailable ?? false }

    public nonisolated static let protectedDataDidBecomeAvailableNotification = Notification.Name("UIApplicationProtectedDataDidBecomeAvailable")
    public nonisolated static let protectedDataWillBecomeUnavailableNotification = Notification.Name(
        "UIApplicationProtectedDataWillBecomeUnavailable")
}
