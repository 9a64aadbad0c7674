import Foundation
package import KeychainModel

/// For every secret on a device, what each path does to it: the answer to "which of my app's
/// secrets survive a new phone, a restore, a passcode removal, a new Face ID, an app transfer?"
package struct SurvivalMatrix: Codable, Sendable {
    /// The device's name.
    package var device: String
    /// The app the matrix was limited to, if any.
    package var app: String?
    /// The paths run, in column order.
    package var paths: [SurvivalPath]
    /// Paths that cannot happen on this device (no passcode to remove), with why.
    package var notRun: [SurvivalPath: String]
    package var rows: [SurvivalRow]
    /// Keychain items whose stored rows fail authentication: no path reads them, so they are
    /// left out of the rows, each named (whatever app they belong to: their group is sealed).
    package var damaged: [String] = []

    /// The cell of the row named `name` (the first of that name) on `path`.
    package func cell(_ name: String, _ path: SurvivalPath) -> SurvivalCell? {
        rows.first { $0.name == name }?.cells[path]
    }
}

/// One secret: a keychain item, a UserDefaults entry, or a sandbox file.
package struct SurvivalRow: Codable, Sendable {
    package enum Kind: String, Codable, Sendable {
        case keychainItem = "keychain"
        /// UserDefaults: a plaintext property list in the sandbox.
        case userDefaults
        /// A file under the sandbox's Documents.
        case sandboxFile = "file"
    }

    package var kind: Kind
    /// `account @ service` for an item, `UserDefaults KEY`, or `Documents/PATH`.
    package var name: String
    /// The app the secret is read as; nil for an item no installed app is entitled to.
    package var app: String?
    /// For keychain items: class, accessibility, synchronizable, group, access control.
    package var itemClass: String?
    package var accessible: String?
    package var synchronizable: Bool?
    package var accessGroup: String?
    package var accessControl: String?
    /// A file's protection class.
    package var fileProtection: String?
    /// The read on the device as it is, when that already fails (a `biometryCurrentSet` item
    /// after its biometry went): every path is then compared with a secret nobody can read.
    package var now: SurvivalCell?
    package var cells: [SurvivalPath: SurvivalCell]
}

/// What one path did to one secret.
package struct SurvivalCell: Codable, Sendable, Equatable {
    package enum Outcome: String, Codable, Sendable {
        /// Still there, with the same value.
        case kept
        /// Gone, or its value changed.
        case lost
        /// Still there, but the read fails (with `status` for a keychain item).
        case unreadable
    }

    package var outcome: Outcome
    /// Apple's status of the failed read, for an unreadable keychain item.
    package var status: KeychainStatus?
    /// Why, in one sentence: for every loss and every unreadable cell.
    package var reason: String?

    package init(_ outcome: Outcome, status: KeychainStatus? = nil, reason: String? = nil) {
        self.outcome = outcome
        self.status = status
        self.reason = reason
    }

    private enum CodingKeys: String, CodingKey { case outcome, status, code, reason }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome, forKey: .outcome)
        try container.encodeIfPresent(status?.name, forKey: .status)
        try container.encodeIfPresent(status?.rawValue, forKey: .code)
        try container.encodeIfPresent(reason, forKey: .reason)
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outcome = try container.decode(Outcome.self, forKey: .outcome)
        status = try container.decodeIfPresent(Int32.self, forKey: .code).map(KeychainStatus.init(rawValue:))
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
    }
}
