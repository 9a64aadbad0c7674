/// What `keyferry lint` looks for: the audit's traps, found in the source before it runs, and
/// the seeds' checklists that only the source shows.
public enum LintRule: Hashable, Sendable, Codable, CustomStringConvertible {
    case trap(KeychainTrap)
    /// A token, password or key written to UserDefaults, a plaintext property list.
    case secretInUserDefaults
    /// A credential written into the source, which ships in the binary.
    case hardcodedSecret
    /// A delete of every item of a class that leaves out kSecAttrSynchronizableAny.
    case cleanupMissesSyncedItems

    public static let all: [LintRule] = KeychainTrap.allCases.map(LintRule.trap) + [.secretInUserDefaults, .hardcodedSecret, .cleanupMissesSyncedItems]

    /// The name in reports: the trap's, or the checklist item's.
    public var name: String {
        switch self {
        case .trap(let trap): trap.rawValue
        case .secretInUserDefaults: "secretInUserDefaults"
        case .hardcodedSecret: "hardcodedSecret"
        case .cleanupMissesSyncedItems: "cleanupMissesSyncedItems"
        }
    }

    public var description: String { name }

    public var title: String {
        switch self {
        case .trap(let trap): trap.title
        case .secretInUserDefaults: "a secret in UserDefaults"
        case .hardcodedSecret: "a credential in the source"
        case .cleanupMissesSyncedItems: "cleanup without kSecAttrSynchronizableAny"
        }
    }

    /// Why it loses or exposes a secret, and what to write instead.
    public var why: String {
        switch self {
        case .trap(let trap): trap.why
        case .secretInUserDefaults:
            "UserDefaults is a plaintext property list in the app's container: it is in every backup, encrypted or not, and readable by anything that copies the container. Store tokens, passwords and keys in the keychain (kSecClassGenericPassword)."
        case .hardcodedSecret:
            "A string in the source is in the compiled binary, where `strings` finds it. Fetch the credential from your server at run time and keep it in the keychain."
        case .cleanupMissesSyncedItems:
            "A query without kSecAttrSynchronizable matches only items that do not sync, so the delete leaves iCloud Keychain items behind. Add kSecAttrSynchronizable: kSecAttrSynchronizableAny."
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let rule = Self.all.first(where: { $0.name == name }) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "no lint rule '\(name)'"))
        }
        self = rule
    }
}

/// One place in a source file that breaks a rule.
public struct LintFinding: Codable, Sendable, Equatable {
    public var rule: LintRule
    public var file: String
    public var line: Int
    public var column: Int
    /// What about this place, when the rule alone does not say (the class stored, the key).
    public var detail: String?

    public init(rule: LintRule, file: String, line: Int, column: Int, detail: String? = nil) {
        self.rule = rule
        self.file = file
        self.line = line
        self.column = column
        self.detail = detail
    }
}
