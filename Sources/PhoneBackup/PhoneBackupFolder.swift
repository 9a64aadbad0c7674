import AppleFormats
import Crypto
import Foundation
package import KeychainModel

/// What a Keyferry device says it is in the backups it writes as a phone: a modern iPhone, so
/// that readers take the iOS 10.2+ code path (`IOS-BACKUP.md`, section 2).
enum PhoneIdentity {
    static let productType = "iPhone17,1"
    static let productVersion = "26.1"
    static let buildVersion = "23B85"
    /// What `Manifest.plist` and `Status.plist` carry as their format versions.
    static let manifestVersion = "10.0"
    static let statusVersion = "3.3"
    /// The keybag rounds of a phone: PBKDF2-SHA256, then PBKDF2-SHA1.
    static let dataProtectionRounds: UInt32 = 10_000_000
    static let rounds: UInt32 = 10_000

    /// A 40-hex-digit UDID for a Keyferry device, as older phones had: the SHA-1 of its ID.
    static func udid(_ deviceID: UUID) -> String {
        Insecure.SHA1.hash(data: Array(deviceID.uuidString.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

/// The files of a backup folder (`IOS-BACKUP.md`, section 1).
struct PhoneBackupFolder {
    let root: URL
    var info: URL { root.appendingPathComponent("Info.plist") }
    var manifest: URL { root.appendingPathComponent("Manifest.plist") }
    var status: URL { root.appendingPathComponent("Status.plist") }
    var manifestDatabase: URL { root.appendingPathComponent("Manifest.db") }

    /// Where the blob of the file with id `fileID` lives. Ids are checked to be forty lowercase
    /// hex digits before they name a path.
    func blob(_ fileID: String) throws -> URL {
        guard fileID.count == 40, fileID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw PhoneBackupError.malformed("a file id '\(fileID.prefix(60))' is not forty lowercase hex digits")
        }
        return root.appendingPathComponent(String(fileID.prefix(2))).appendingPathComponent(fileID)
    }

    /// Whether `url` is a backup folder (it holds a `Manifest.plist`), as opposed to a Keyferry archive.
    static func isBackupFolder(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

/// Domains and paths of what a Keyferry device puts in a backup.
enum PhoneDomain {
    static let keychain = "KeychainDomain"
    static let keychainFile = "keychain-backup.plist"
    static let appPrefix = "AppDomain-"

    static let groupPrefix = "AppDomainGroup-"

    static func app(_ bundleID: String) -> String { appPrefix + bundleID }
    /// An app's domain, or an app group's (`AppDomainGroup-group.…`).
    static func container(_ name: String) -> String { AppManifest.isAppGroup(name) ? groupPrefix + name : appPrefix + name }
    static func defaults(_ bundleID: String) -> String { "Library/Preferences/\(bundleID).plist" }
}

/// Why a backup folder cannot be read or written.
package enum PhoneBackupError: CodedError, Equatable {
    package static let domain = "phoneBackup"

    case malformed(String)
    case wrongPassword
    case needsPassword
    case exists(String)
    case unsupported(String)
    /// Unencrypted, so nothing proves who wrote it; `sameDevice` when it claims the target.
    case unauthenticated(sameDevice: Bool)

    package enum Code: String, Sendable {
        case malformed, wrongPassword, needsPassword, exists, unsupported, unauthenticated
    }

    package var code: Code {
        switch self {
        case .malformed: .malformed
        case .wrongPassword: .wrongPassword
        case .needsPassword: .needsPassword
        case .exists: .exists
        case .unsupported: .unsupported
        case .unauthenticated: .unauthenticated
        }
    }

    package var kind: ProblemKind {
        switch self {
        case .wrongPassword, .needsPassword: .authentication
        case .malformed, .exists, .unsupported, .unauthenticated: .invalidInput
        }
    }

    package var message: String { description }

    package var description: String {
        switch self {
        case .malformed(let detail): "the iOS backup is malformed: \(detail)"
        case .wrongPassword: "wrong password: it does not open the backup's keybag"
        case .needsPassword: "the iOS backup is encrypted, and no password was given"
        case .exists(let path): "\(path) already exists; an iOS backup is written to a new folder"
        case .unsupported(let detail): "the iOS backup cannot be read: \(detail)"
        case .unauthenticated(let sameDevice):
            "the iOS backup is unencrypted, and nothing in one proves who wrote it: its apps, their team and app groups, defaults and files "
                + "could be anyone's, and it replaces this device's local items"
                + (sameDevice ? "; it claims to be this device's, and a genuine one's keychain items would open only here, but its files prove nothing" : "")
                + "; an encrypted backup's items are authenticated"
        }
    }
}
