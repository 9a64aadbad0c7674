/// A path a device's secrets can take: a column of the survival matrix, each run for real on
/// scratch copies of the device and on new scratch devices.
package enum SurvivalPath: String, CaseIterable, Codable, CodingKeyRepresentable, Sendable {
    case iCloudKeychain = "icloud-keychain"
    case encryptedBackupNewDevice = "encrypted-backup-new-device"
    case unencryptedBackupNewDevice = "unencrypted-backup-new-device"
    case encryptedBackupSameDevice = "encrypted-backup-same-device"
    case unencryptedBackupSameDevice = "unencrypted-backup-same-device"
    case quickStart = "quick-start"
    case passcodeRemoved = "passcode-removed"
    case biometryReenrolled = "biometry-reenrolled"
    case appTransferred = "app-transferred"
    case appReinstalled = "app-reinstalled"
    case beforeFirstUnlock = "before-first-unlock"
    case lockedAfterGrace = "locked-after-grace"

    /// A column heading short enough for a terminal.
    package var heading: String {
        switch self {
        case .iCloudKeychain: "iCloud"
        case .encryptedBackupNewDevice: "enc>new"
        case .unencryptedBackupNewDevice: "plain>new"
        case .encryptedBackupSameDevice: "enc>same"
        case .unencryptedBackupSameDevice: "plain>same"
        case .quickStart: "QuickStart"
        case .passcodeRemoved: "no passcode"
        case .biometryReenrolled: "new face"
        case .appTransferred: "team moved"
        case .appReinstalled: "reinstall"
        case .beforeFirstUnlock: "BFU"
        case .lockedAfterGrace: "locked"
        }
    }

    /// What the path does, in one sentence.
    package var summary: String {
        switch self {
        case .iCloudKeychain: "iCloud Keychain: a new device joins a circle with this one, and both sync"
        case .encryptedBackupNewDevice: "an encrypted backup restored onto a new device"
        case .unencryptedBackupNewDevice: "an unencrypted backup restored onto a new device"
        case .encryptedBackupSameDevice: "an encrypted backup restored onto this device"
        case .unencryptedBackupSameDevice: "an unencrypted backup restored onto this device"
        case .quickStart: "Quick Start: a device-to-device transfer onto a new device"
        case .passcodeRemoved: "the passcode is removed"
        case .biometryReenrolled: "biometry is re-enrolled (a new face or finger)"
        case .appTransferred: "the app is transferred to another developer team"
        case .appReinstalled: "the app is deleted and installed again"
        case .beforeFirstUnlock: "read after a reboot, before the first unlock"
        case .lockedAfterGrace: "read while locked, after the grace period"
        }
    }
}
