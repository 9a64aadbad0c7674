import KeychainModel

/// Why a path lost a secret or left it unreadable, in one sentence. The outcome itself was
/// measured; these rules only name the cause, and when none applies the read's own message
/// stands.
enum LossReason {
    static func explain(_ secret: Secret, _ path: SurvivalPath, _ cell: SurvivalCell, restored: RestoreReport.ItemOutcome?) -> String? {
        switch secret.locator {
        case .item(let item): itemReason(item, path, cell, restored: restored)
        case .defaults, .file: sandboxReason(secret, path, cell)
        }
    }

    private static func itemReason(_ item: ItemRecord, _ path: SurvivalPath, _ cell: SurvivalCell, restored: RestoreReport.ItemOutcome?) -> String? {
        let flags = item.accessControl?.flags ?? []
        switch path {
        case .iCloudKeychain:
            if item.neverExported == .secureEnclave { return NeverExported.secureEnclave.sentence }
            if item.protection.isThisDeviceOnly { return "device-bound (ThisDeviceOnly): it never leaves this device" }
            if !item.synchronizable { return "not synchronizable: iCloud Keychain carries only items added with kSecAttrSynchronizable" }
        case .encryptedBackupNewDevice, .unencryptedBackupNewDevice, .encryptedBackupSameDevice, .unencryptedBackupSameDevice, .quickStart:
            if let reason = restored?.reason { return reason.sentence }
            if restored == nil, item.protection == .whenPasscodeSetThisDeviceOnly {
                return "never leaves the device: WhenPasscodeSetThisDeviceOnly items are in no backup or transfer"
            }
            switch restored == nil ? item.neverExported : nil {
            case .secureEnclave: return NeverExported.secureEnclave.sentence
            case .accessControl:
                return "never leaves the device: items whose access control asks for the user (\(item.accessControl!.expression)) are in no backup or transfer"
            case nil: break
            }
        case .passcodeRemoved:
            if item.protection == .whenPasscodeSetThisDeviceOnly { return "deleted with the passcode (WhenPasscodeSetThisDeviceOnly)" }
            if !flags.isDisjoint(with: [.biometryAny, .biometryCurrentSet]) {
                return "biometry is turned off with the passcode, and its access control asks for it (\(item.accessControl!.expression))"
            }
            if !flags.isDisjoint(with: [.devicePasscode, .userPresence]) {
                return "no passcode is left to answer its access control (\(item.accessControl!.expression))"
            }
        case .biometryReenrolled:
            if flags.contains(.biometryCurrentSet) { return "biometryCurrentSet invalidated by re-enrolment" }
        case .appTransferred:
            if !item.accessGroup.hasPrefix("group.") { return "access group of the old team (\(item.accessGroup)): the new team's app cannot reach it" }
        case .appReinstalled:
            break
        case .beforeFirstUnlock:
            if cell.status == .interactionNotAllowed {
                return "before first unlock only Always items open; this one is \(item.protection.name) (errSecInteractionNotAllowed)"
            }
        case .lockedAfterGrace:
            if cell.status == .interactionNotAllowed {
                return "class A (\(item.protection.name)): its key leaves memory when the grace period after locking ends"
            }
        }
        return nil
    }

    private static func sandboxReason(_ secret: Secret, _ path: SurvivalPath, _ cell: SurvivalCell) -> String? {
        switch path {
        case .iCloudKeychain: "app data is not part of iCloud Keychain: only keychain items sync"
        case .appReinstalled: "the sandbox is wiped when the app is deleted"
        case .unencryptedBackupNewDevice, .encryptedBackupNewDevice, .unencryptedBackupSameDevice, .encryptedBackupSameDevice, .quickStart:
            cell.outcome == .lost ? "not in the backup" : nil
        case .beforeFirstUnlock:
            cell.outcome == .unreadable
                ? (secret.row.fileProtection == "complete"
                    ? "complete file protection: unreadable whenever the device is locked, and so before first unlock"
                    : "protected until first unlock (\(secret.row.fileProtection ?? "completeUntilFirstUserAuthentication"))")
                : nil
        case .lockedAfterGrace:
            cell.outcome == .unreadable ? "complete file protection: unreadable once the grace period after locking ends" : nil
        default: nil
        }
    }
}
