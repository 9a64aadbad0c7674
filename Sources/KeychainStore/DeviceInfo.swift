public import Foundation
public import KeychainModel
public import KeyferryCrypto

/// The public facts of a device, kept in `device.json`. Nothing here is secret.
public struct DeviceInfo: Codable, Sendable, Equatable {
    /// 1 for an iPhone; 2 for another profile, which a build before profiles refuses rather
    /// than run as an iPhone.
    public static let formats = 1...2

    /// Format of the device directory; readers refuse a format they do not know.
    public var format: Int
    public var id: UUID
    public var name: String
    public var createdAt: Date
    /// Seconds class A keys stay in memory after the screen locks.
    public var gracePeriod: TimeInterval
    /// What it behaves as; absent (devices made before profiles) is an iPhone.
    var storedProfile: DeviceProfile?

    public var profile: DeviceProfile { storedProfile ?? .iphone }

    private enum CodingKeys: String, CodingKey {
        case format, id, name, createdAt, gracePeriod
        case storedProfile = "profile"
    }

    init(id: UUID, name: String, createdAt: Date, gracePeriod: TimeInterval, profile: DeviceProfile) {
        format = profile == .iphone ? 1 : 2
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.gracePeriod = gracePeriod
        storedProfile = profile == .iphone ? nil : profile
    }
}

/// How `Device.create` sets a new device up.
public struct DeviceOptions: Sendable {
    public var name: String
    public var passcode: String?
    public var enrollBiometry: Bool
    public var gracePeriod: TimeInterval
    /// Argon2id cost of the passcode. Tests use `.minimum`; devices `.interactive`.
    public var passcodeHashing: PasswordHashParameters
    public var profile: DeviceProfile

    public init(
        name: String = "iPhone", passcode: String? = nil, enrollBiometry: Bool = false,
        gracePeriod: TimeInterval = 10, passcodeHashing: PasswordHashParameters = .interactive, profile: DeviceProfile = .iphone
    ) {
        self.profile = profile
        self.name = name
        self.passcode = passcode
        self.enrollBiometry = enrollBiometry
        self.gracePeriod = gracePeriod
        self.passcodeHashing = passcodeHashing
    }
}
