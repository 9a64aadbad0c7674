import Foundation
import KeyferryCrypto

/// The public facts of a device, kept in `device.json`. Nothing here is secret.
public struct DeviceInfo: Codable, Sendable, Equatable {
    public static let currentFormat = 1

    /// Format of the device directory; readers refuse a format they do not know.
    public var format: Int
    public var id: UUID
    public var name: String
    public var createdAt: Date
    /// Seconds class A keys stay in memory after the screen locks.
    public var gracePeriod: TimeInterval
}

/// How `Device.create` sets a new device up.
public struct DeviceOptions: Sendable {
    public var name: String
    public var passcode: String?
    public var enrollBiometry: Bool
    public var gracePeriod: TimeInterval
    /// Argon2id cost of the passcode. Tests use `.minimum`; devices `.interactive`.
    public var passcodeHashing: PasswordHashParameters

    public init(
        name: String = "iPhone", passcode: String? = nil, enrollBiometry: Bool = false,
        gracePeriod: TimeInterval = 10, passcodeHashing: PasswordHashParameters = .interactive
    ) {
        self.name = name
        self.passcode = passcode
        self.enrollBiometry = enrollBiometry
        self.gracePeriod = gracePeriod
        self.passcodeHashing = passcodeHashing
    }
}

/// Where a device keeps each thing inside its directory.
struct DeviceLayout: Sendable {
    let root: URL
    var info: URL { root.appendingPathComponent("device.json") }
    /// The simulated hardware UID: 32 random bytes, owner-only, never copied anywhere.
    var hardwareUID: URL { root.appendingPathComponent("hardware-uid") }
    var database: URL { root.appendingPathComponent("keychain.db") }
    /// When the device last made a backup of itself (`Device.recordBackup`).
    var lastBackup: URL { root.appendingPathComponent("last-backup.json") }
    var apps: URL { root.appendingPathComponent("apps") }

    func sandbox(_ bundleID: String) -> URL { apps.appendingPathComponent(bundleID) }
    func defaultsFile(_ bundleID: String) -> URL {
        sandbox(bundleID).appendingPathComponent("Library/Preferences/\(bundleID).plist")
    }
    func documents(_ bundleID: String) -> URL { sandbox(bundleID).appendingPathComponent("Documents") }
}

/// Device status as `keyferry device status` shows it.
public struct DeviceStatus: Sendable, Codable, Equatable {
    public var name: String
    public var id: UUID
    public var poweredOn: Bool
    /// nil while powered off.
    public var lockState: LockState?
    public var protectedDataAvailable: Bool
    public var graceRemaining: TimeInterval?
    public var passcodeSet: Bool
    public var biometryEnrolled: Bool
    /// `LAContext.evaluatedPolicyDomainState`: changes whenever a face or finger is enrolled,
    /// re-enrolled or removed (a digest of the enrollment, never the enrollment itself).
    public var biometryDomainState: Data?
    public var failedPasscodeAttempts: Int
    /// Seconds until a passcode may be tried again, after five or more failed attempts.
    public var passcodeRetryAfter: TimeInterval?
    /// Live items (tombstones excluded), counted without opening any.
    public var itemCount: Int
}
