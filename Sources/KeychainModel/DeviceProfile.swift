/// What kind of Apple device a Keyferry device behaves as. Each one's differences from an
/// iPhone, with their sources, are in Protocol/profiles.md.
public enum DeviceProfile: String, Codable, Sendable, CaseIterable {
    /// An iPhone on the newest iOS: the default.
    case iphone
    /// The iOS Simulator. It has no keystore: nothing is ever locked away, no passcode can be
    /// set though it reports one (so `whenPasscodeSetThisDeviceOnly` items are accepted), and it
    /// has no iCloud Keychain.
    case simulator
    /// A Mac: the data protection keychain, as on iOS, beside the file-based keychain that
    /// SecItem reaches by default there (`MacKeychain`); Touch ID rather than Face ID.
    case mac
    /// An iPhone on iOS 17.3 to 26.3: Stolen Device Protection exists, off unless turned on.
    case iphoneIOS17 = "iphone-ios17"
    /// An iPhone before iOS 17.3 (iOS 16, 17.0 to 17.2): no Stolen Device Protection.
    case iphoneIOS16 = "iphone-ios16"

    /// One line for `--help` and listings.
    public var summary: String {
        switch self {
        case .iphone: "an iPhone on the newest iOS (the default)"
        case .simulator: "the iOS Simulator: no keystore, no passcode, no iCloud Keychain"
        case .mac: "a Mac: the data protection keychain beside the file-based one, Touch ID"
        case .iphoneIOS17: "an iPhone on iOS 17.3 to 26.3: Stolen Device Protection off unless turned on"
        case .iphoneIOS16: "an iPhone before iOS 17.3: no Stolen Device Protection"
        }
    }

    /// Stolen Device Protection on a new device: on (away from familiar locations) from iOS
    /// 26.4, off before; nil where it does not exist (before iOS 17.3, the Simulator, a Mac).
    public var stolenDeviceProtection: StolenDeviceProtection? {
        switch self {
        case .iphone: .away
        case .iphoneIOS17: .off
        case .iphoneIOS16, .simulator, .mac: nil
        }
    }

    /// A new device's name when none is given.
    public var deviceName: String {
        switch self {
        case .iphone, .iphoneIOS17, .iphoneIOS16: "iPhone"
        case .simulator: "iOS Simulator"
        case .mac: "Mac"
        }
    }

    /// What the device calls its biometry (`LABiometryType`).
    public var biometry: String { self == .mac ? "Touch ID" : "Face ID" }

    /// Why an iPhone's backups and Quick Start are no path for this device, or nil on an iPhone.
    public var withoutIphoneMigration: String? {
        switch self {
        case .iphone, .iphoneIOS17, .iphoneIOS16: nil
        case .simulator:
            "the iOS Simulator has no backup or Quick Start; a copy of it (simctl clone, or its folder on another Mac) keeps every item, ThisDeviceOnly ones too"
        case .mac: "a Mac has no iPhone backup or Quick Start; Time Machine and Migration Assistant are not modelled"
        }
    }

    /// Whether SecItem calls may reach a file-based keychain beside the data protection one.
    public var hasFileBasedKeychain: Bool { self == .mac }

    /// Whether it can have a passcode: the Simulator has no setting for one.
    public var hasPasscodeSetting: Bool { self != .simulator }

    /// Whether it reports a passcode as set whatever its settings: the Simulator's stand-in for
    /// the keystore never says "no passcode".
    public var reportsPasscodeSet: Bool { self == .simulator }

    /// Whether it can join an iCloud Keychain circle.
    public var hasICloudKeychain: Bool { self != .simulator }

    /// A profile by its name, or a sentence that lists them.
    public init(named name: String) throws(DeviceError) {
        guard let profile = DeviceProfile(rawValue: name) else {
            throw DeviceError(
                .invalidArgument,
                "'\(name)' is not a device profile; profiles: " + DeviceProfile.allCases.map(\.rawValue).joined(separator: ", ") + ".")
        }
        self = profile
    }
}
