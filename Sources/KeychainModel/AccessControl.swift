import Foundation

/// Apple's `SecAccessControlCreateFlags`, with Apple's bit values.
public struct AccessControlFlags: OptionSet, Hashable, Sendable, Codable {
    /// `UInt`, as Apple's `CFOptionFlags`, so code that builds the flags from a raw value compiles.
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let userPresence = AccessControlFlags(rawValue: 1 << 0)
    public static let biometryAny = AccessControlFlags(rawValue: 1 << 1)
    public static let biometryCurrentSet = AccessControlFlags(rawValue: 1 << 3)
    public static let devicePasscode = AccessControlFlags(rawValue: 1 << 4)
    public static let or = AccessControlFlags(rawValue: 1 << 14)
    public static let and = AccessControlFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = AccessControlFlags(rawValue: 1 << 30)
    public static let applicationPassword = AccessControlFlags(rawValue: 1 << 31)

    /// The flags that each ask the user to prove something.
    public static let constraints: [(name: String, flag: AccessControlFlags)] = [
        ("userPresence", .userPresence), ("biometryAny", .biometryAny),
        ("biometryCurrentSet", .biometryCurrentSet), ("devicePasscode", .devicePasscode),
    ]
    static let others: [(name: String, flag: AccessControlFlags)] = [
        ("or", .or), ("and", .and), ("privateKeyUsage", .privateKeyUsage), ("applicationPassword", .applicationPassword),
    ]
}

/// A `SecAccessControl`: the protection class plus the user-presence constraints a read or an
/// update must satisfy. Valid by construction.
public struct AccessControl: Hashable, Sendable, Codable, CustomStringConvertible {
    public let protection: ProtectionClass
    public let flags: AccessControlFlags

    /// Validates Apple's rules: two or more constraints need exactly one of `or` / `and`.
    public init(protection: ProtectionClass, flags: AccessControlFlags) throws(KeychainError) {
        let known = AccessControlFlags.constraints.map(\.flag) + AccessControlFlags.others.map(\.flag)
        let unknown = flags.subtracting(AccessControlFlags(known))
        guard unknown.isEmpty else {
            throw KeychainError(.param, "access control flags 0x\(String(unknown.rawValue, radix: 16)) are not ones Keyferry knows.")
        }
        let count = AccessControlFlags.constraints.filter { flags.contains($0.flag) }.count
        if flags.contains(.or) && flags.contains(.and) {
            throw KeychainError(.param, "access control cannot combine constraints with both 'or' and 'and'.")
        }
        if count > 1 && !flags.contains(.or) && !flags.contains(.and) {
            throw KeychainError(.param, "two or more access control constraints need 'or' or 'and' between them, e.g. biometryCurrentSet|or|devicePasscode.")
        }
        self.protection = protection
        self.flags = flags
    }

    private enum CodingKeys: String, CodingKey { case protection, flags }

    /// Decoding validates like `init(protection:flags:)`: an access control is never invalid.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            protection: try container.decode(ProtectionClass.self, forKey: .protection),
            flags: try container.decode(AccessControlFlags.self, forKey: .flags))
    }

    /// Whether a read asks the user (biometry, the passcode, or either): such items are in no
    /// backup and no transfer (`SecServerCopyKeychainPlist` skips them), onto any device.
    public var asksForUser: Bool { AccessControlFlags.constraints.contains { flags.contains($0.flag) } }

    /// Parses Apple's flag names joined by `|`, e.g. `biometryCurrentSet|or|devicePasscode`.
    public init(protection: ProtectionClass, expression: String) throws(KeychainError) {
        var flags: AccessControlFlags = []
        let all = AccessControlFlags.constraints + AccessControlFlags.others
        for word in expression.split(separator: "|", omittingEmptySubsequences: false) {
            let name = word.trimmingCharacters(in: .whitespaces)
            guard let match = all.first(where: { $0.name == name }) else {
                throw KeychainError(.param, "'\(name)' is not an access control flag; use \(all.map(\.name).joined(separator: ", ")).")
            }
            flags.insert(match.flag)
        }
        try self.init(protection: protection, flags: flags)
    }

    /// The user-presence constraints, e.g. `[.biometryAny, .devicePasscode]`.
    public var constraints: [AccessControlFlags] {
        AccessControlFlags.constraints.map(\.flag).filter { flags.contains($0) }
    }

    /// Whether a read of the secret or an update needs the user.
    public var requiresAuthentication: Bool { !constraints.isEmpty }

    /// The flags in Apple's names, joined as the command line takes them.
    public var expression: String {
        let names = AccessControlFlags.constraints.filter { flags.contains($0.flag) }.map(\.name)
        var words = [String]()
        let combinator = flags.contains(.and) ? "and" : "or"
        for (index, name) in names.enumerated() {
            if index > 0 { words.append(combinator) }
            words.append(name)
        }
        if names.count <= 1 && (flags.contains(.or) || flags.contains(.and)) { words.append(combinator) }
        if flags.contains(.privateKeyUsage) { words.append("privateKeyUsage") }
        if flags.contains(.applicationPassword) { words.append("applicationPassword") }
        return words.joined(separator: "|")
    }

    public var description: String { "\(protection.name): \(expression.isEmpty ? "no constraints" : expression)" }

    /// What the user did when asked, and what the device knows, decide whether the
    /// constraints are met: `nil` when they are, otherwise the failing status.
    public func evaluate(_ context: AuthenticationContext, facts: AuthenticationFacts) -> KeychainError? {
        guard requiresAuthentication else { return nil }
        guard context.interactionAllowed, !context.responses.isEmpty else {
            return KeychainError(
                .interactionNotAllowed,
                "the item needs user authentication (\(expression)) and no prompt may be shown; read it in the foreground with an authentication response.",
                reason: .userAuthenticationNeeded)
        }
        if context.responses.contains(.cancel) {
            return KeychainError(.userCanceled, "the user cancelled the authentication prompt.")
        }
        let biometryMatched = facts.biometryEnrolled && context.responses.contains(.biometryMatch)
        // One passcode per prompt, as a user types one: a request that carries several has
        // its first tried, so no request can make many guesses.
        let passcode = context.responses.lazy.compactMap { response -> String? in
            if case .passcode(let code) = response { code } else { nil }
        }.first
        let passcodeMatched = passcode.map(facts.isCorrectPasscode) ?? false
        func satisfied(_ constraint: AccessControlFlags) -> Bool {
            switch constraint {
            case .userPresence: biometryMatched || passcodeMatched
            case .biometryAny: biometryMatched
            case .biometryCurrentSet: biometryMatched && facts.biometryUnchangedSinceItemWasAdded
            case .devicePasscode: passcodeMatched
            default: false
            }
        }
        let results = constraints.map(satisfied)
        let passed = flags.contains(.and) ? results.allSatisfy { $0 } : results.contains(true)
        if passed { return nil }
        if constraints.contains(.biometryCurrentSet) && biometryMatched && !facts.biometryUnchangedSinceItemWasAdded {
            // With a passcode alternative (`biometryCurrentSet|or|devicePasscode`) the item is
            // not lost: deleting it would throw away what the passcode still opens.
            if flags.contains(.or), constraints.contains(where: { $0 == .devicePasscode || $0 == .userPresence }) {
                return KeychainError(
                    .authFailed,
                    "the enrolled biometry changed since this item was added, so biometry no longer opens it; it still opens with the device passcode (\(expression)). Read it with the passcode, then add it again to bind it to the new biometry."
                )
            }
            return KeychainError(
                .authFailed,
                "the enrolled biometry changed since this biometryCurrentSet item was added; it can no longer be read. Delete it and add it again after the user signs in."
            )
        }
        if !facts.biometryEnrolled && constraints.allSatisfy({ $0 == .biometryAny || $0 == .biometryCurrentSet }) {
            return KeychainError(.authFailed, "the item needs biometry and none is enrolled on this device.")
        }
        return KeychainError(.authFailed, "authentication did not satisfy \(expression).")
    }
}

/// One thing the simulated user does at an authentication prompt.
public enum AuthenticationResponse: Hashable, Sendable, Codable {
    case biometryMatch
    case biometryNoMatch
    case cancel
    case passcode(String)
}

/// The `LAContext` of a call: what the simulated user will do if prompted, and whether a
/// prompt may be shown at all (`kSecUseAuthenticationUIFail`, background work).
public struct AuthenticationContext: Hashable, Sendable, Codable {
    public var responses: [AuthenticationResponse]
    public var interactionAllowed: Bool
    /// `kSecUseAuthenticationUISkip`: a read leaves out the items whose secret needs a prompt
    /// instead of failing on them (`s3dl_query` in Apple's `SecItemDb.c`).
    public var skipsItemsNeedingAuthentication: Bool

    public init(responses: [AuthenticationResponse] = [], interactionAllowed: Bool = true, skipsItemsNeedingAuthentication: Bool = false) {
        self.responses = responses
        self.interactionAllowed = interactionAllowed
        self.skipsItemsNeedingAuthentication = skipsItemsNeedingAuthentication
    }

    private enum CodingKeys: String, CodingKey { case responses, interactionAllowed, skipsItemsNeedingAuthentication }

    /// Each field left out means what a call that does not set it means: the control API's
    /// clients written before a field was added keep working (`Protocol/node.md`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            responses: try container.decodeIfPresent([AuthenticationResponse].self, forKey: .responses) ?? [],
            interactionAllowed: try container.decodeIfPresent(Bool.self, forKey: .interactionAllowed) ?? true,
            skipsItemsNeedingAuthentication: try container.decodeIfPresent(Bool.self, forKey: .skipsItemsNeedingAuthentication) ?? false)
    }

    /// No prompt can be shown: the background, a widget, a pre-warmed launch.
    public static let noInteraction = AuthenticationContext(responses: [], interactionAllowed: false)

    public static func responding(_ responses: AuthenticationResponse...) -> AuthenticationContext {
        AuthenticationContext(responses: responses)
    }
}

/// What the device knows when it evaluates an access control.
public struct AuthenticationFacts {
    public var biometryEnrolled: Bool
    public var biometryUnchangedSinceItemWasAdded: Bool
    public var isCorrectPasscode: (String) -> Bool

    public init(biometryEnrolled: Bool, biometryUnchangedSinceItemWasAdded: Bool, isCorrectPasscode: @escaping (String) -> Bool) {
        self.biometryEnrolled = biometryEnrolled
        self.biometryUnchangedSinceItemWasAdded = biometryUnchangedSinceItemWasAdded
        self.isCorrectPasscode = isCorrectPasscode
    }
}
