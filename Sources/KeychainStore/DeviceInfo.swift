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
