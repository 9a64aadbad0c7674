import Foundation
import KeychainModel

/// For every secret on a device, what each path does to it: the answer to "which of my app's
/// secrets survive a new phone, a restore, a passcode removal, a new Face ID, an app transfer?"
public struct SurvivalMatrix: Codable, Sendable {
    /// The device's name.
    public var device: String
    /// The app the matrix was limited to, if any.
    public var app: String?
    /// The paths run, in column order.
    public var paths: [SurvivalPath]
    /// Paths that cannot happen on this device (no passcode to remove), with why.
    public var notRun: [SurvivalPath: String]
    public var rows: [SurvivalRow]

    /// The cell of the row named `name` (the first of that name) on `path`.
    public func cell(_ name: String, _ path: SurvivalPath) -> SurvivalCell? {
        rows.first { $0.name == name }?.cells[path]
    }
}

/// One secret: a keychain item, a UserDefaults entry, or a sandbox file.
public struct SurvivalRow: Codable, Sendable {
    public enum Kind: String, Codable, Sendable {
        case keychainItem = "keychain"
        /// UserDefaults: a plaintext property list in the sandbox.
        case userDefaults
        /// A file under the sandbox's Documents.
        case sandboxFile = "file"
    }

    public var kind: Kind
    /// `account @ service` for an item, `UserDefaults KEY`, or `Documents/PATH`.
    public var name: String
    /// The app the secret is read as; nil for an item no installed app is entitled to.
    public var app: String?
    /// For keychain items: class, accessibility, synchronizable, group, access control.
    public var itemClass: String?
    public var accessible: String?
    public var synchronizable: Bool?
    public var accessGroup: String?
    public var accessControl: String?
    /// A file's protection class.
    public var fileProtection: String?
    /// The read on the device as it is, when that already fails (a `biometryCurrentSet` item
    /// after its biometry went): every path is then compared with a secret nobody can read.
    public var now: SurvivalCell?
    public var cells: [SurvivalPath: SurvivalCell]
}

/// What one path did to one secret.
public struct SurvivalCell: Codable, Sendable, Equatable {
    public enum Outcome: String, Codable, Sendable {
        /// Still there, with the same value.
        case kept
        /// Gone, or its value changed.
        case lost
        /// Still there, but the read fails (with `status` for a keychain item).
        case unreadable
    }

    public var outcome: Outcome
    /// Apple's status of the failed read, for an unreadable keychain item.
    public var status: KeychainStatus?
    /// Why, in one sentence: for every loss and every unreadable cell.
    public var reason: String?

    public init(_ outcome: Outcome, status: KeychainStatus? = nil, reason: String? = nil) {
        self.outcome = outcome
        self.status = status
        self.reason = reason
    }

    private enum CodingKeys: String, CodingKey { case outcome, status, code, reason }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome, forKey: .outcome)
        try container.encodeIfPresent(status?.name, forKey: .status)
        try container.encodeIfPresent(status?.rawValue, forKey: .code)
        try container.encodeIfPresent(reason, forKey: .reason)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decode(Outcome.self, forKey: .outcome)
        status = try container.decodeIfPresent(Int32.self, forKey: .code).map(KeychainStatus.init(rawValue:))
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
    }
}
