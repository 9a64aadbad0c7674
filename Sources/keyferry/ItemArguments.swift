public import ArgumentParser
import Foundation
public import KeychainModel
import NodeControl

/// The class and attribute flags shared by every item command, named as Apple names the
/// attributes (`kSecAttrAccount` is `--account`). `--attr NAME=VALUE` reaches the rest.
struct ItemAttributes: ParsableArguments {
    // Optional, with the default said in the help: ArgumentParser would show a default by its
    // raw value (`genp`).
    @Option(name: .customLong("class"), help: "Item class: genericPassword (the default), internetPassword, certificate, key, identity.")
    var givenClass: ItemClass?
    var itemClass: ItemClass { givenClass ?? .genericPassword }
    @Option(help: "kSecAttrService.") var service: String?
    @Option(help: "kSecAttrAccount.") var account: String?
    @Option(help: "kSecAttrServer.") var server: String?
    @Option(
        name: .customLong("protocol"), help: "kSecAttrProtocol: Apple's name (HTTPS, SSH, ...) or code (htps, ssh).",
        transform: Checked.internetProtocol)
    var protocolName: String?
    @Option(help: "kSecAttrPort, 0 to 65535.", transform: Checked.port) var port: Int64?
    @Option(help: "kSecAttrPath.") var path: String?
    @Option(help: "kSecAttrSecurityDomain.") var securityDomain: String?
    @Option(help: "kSecAttrAuthenticationType, e.g. form.") var authenticationType: String?
    @Option(help: "kSecAttrLabel.") var label: String?
    @Option(help: "kSecAttrComment.") var comment: String?
    @Option(help: "kSecAttrAccessGroup: which of the app's groups (default: its first).") var group: String?
    @Option(
        help: ArgumentHelp(
            "kSecUseDataProtectionKeychain on a Mac: data-protection (true) or file-based (false).",
            discussion: """
                Without it a Mac adds to the file-based keychain unless the item needs the data protection \
                one (access control, --sync yes), and searches, updates and deletes in both. Other \
                devices ignore it, as Apple's other platforms do.
                """))
    var keychain: MacKeychain?
    /// `kSecUseDataProtectionKeychain` as the flag gives it.
    var useDataProtectionKeychain: Bool? { keychain.map { $0 == .dataProtection } }
    @Option(
        name: .customLong("attr"),
        help: ArgumentHelp(
            "Any other attribute as NAME=VALUE, e.g. applicationTag=hex:0a0b or keyType=kSecAttrKeyTypeRSA (repeatable).",
            discussion: """
                NAME is Apple's name with or without kSecAttr (keyType, kSecAttrKeyType) or its short code \
                (type). Data values take hex: or base64: prefixes (plain text otherwise), and so do the \
                text attributes Apple keeps as blobs (account, service, label ...), for items an app \
                stored with its account as Data; numbers take Apple's named values too \
                (kSecAttrKeyTypeRSA, kSecAttrKeyClassPrivate); dates take ISO 8601.
                """))
    var extra: [String] = []

    /// The attributes given, typed by each attribute's kind.
    func attributes() throws -> Attributes {
        var out = Attributes()
        let named: [(AttributeKey, String?)] = [
            (.service, service), (.account, account), (.server, server), (.protocol, protocolName),
            (.path, path), (.securityDomain, securityDomain), (.authenticationType, authenticationType),
            (.label, label), (.comment, comment),
        ]
        for case let (key, value?) in named { out[key] = .string(value) }
        if let port { out[.port] = .number(port) }
        for assignment in extra {
            let (key, value) = try parseAssignment(assignment, flag: "--attr")
            out[key] = value
        }
        return out
    }
}

/// `NAME=VALUE` with the value read according to the attribute's kind.
func parseAssignment(_ text: String, flag: String) throws -> (AttributeKey, AttributeValue) {
    guard let equals = text.firstIndex(of: "=") else { throw ValidationError("\(flag) takes NAME=VALUE, not '\(text)'.") }
    let name = String(text[..<equals])
    let raw = String(text[text.index(after: equals)...])
    let key = AttributeKey(name: name)
    if let key, let own = ownOptions[key] {
        throw ValidationError("\(flag): \(name) has an option of its own: \(own).")
    }
    guard let key, key.kind != nil else {
        throw ValidationError("\(flag): '\(name)' is not a keychain attribute (try account, service, label, applicationTag, keyType ...).")
    }
    switch key {
    case .protocol: return (key, .string(try Checked.internetProtocol(raw)))
    case .port: return (key, .number(try Checked.port(raw)))
    default: return (key, try attributeValue(raw, key: key, name: name))
    }
}

/// The attributes the keychain keeps apart from the class's own, each set by an option of its own.
private let ownOptions: [AttributeKey: String] = [
    .accessGroup: "--group (--set-group in an update)", .accessible: "--accessible (--set-accessible in an update)",
    .synchronizable: "--sync (--set-sync in an update)", .accessControl: "--access-control, when adding",
    .creationDate: "none, the keychain keeps it", .modificationDate: "none, the keychain keeps it",
]

func attributeValue(_ raw: String, key: AttributeKey, name: String) throws -> AttributeValue {
    switch key.kind! {
    case .string:
        // A blob (account, service, label ...) holds data too, as apps that store it as Data do.
        if key.isBlob, raw.hasPrefix("hex:") || raw.hasPrefix("base64:") { return try data(raw, name: name) }
        return .string(raw)
    case .number:
        guard let n = Int64(raw) ?? NamedNumbers.byName[raw]?.value else {
            throw ValidationError("\(name) takes a whole number or one of Apple's named values, not '\(raw)'.")
        }
        return .number(n)
    case .bool:
        switch raw.lowercased() {
        case "true", "yes", "1": return .bool(true)
        case "false", "no", "0": return .bool(false)
        default: throw ValidationError("\(name) takes true or false, not '\(raw)'.")
        }
    case .data:
        return try data(raw, name: name)
    case .date:
        if let date = try? Date(raw, strategy: .iso8601) { return .date(date) }
        throw ValidationError("\(name) takes an ISO 8601 date such as 2026-01-31T12:00:00Z, not '\(raw)'.")
    }
}

/// Data given as `hex:...`, `base64:...` or plain text (its UTF-8 bytes).
private func data(_ raw: String, name: String) throws -> AttributeValue {
    if raw.hasPrefix("hex:") {
        guard let bytes = Hex.decode(raw.dropFirst(4)) else { throw ValidationError("\(name): '\(raw)' is not valid hex.") }
        return .data(Data(bytes))
    }
    if raw.hasPrefix("base64:") {
        guard let data = Data(base64Encoded: String(raw.dropFirst(7))) else { throw ValidationError("\(name): '\(raw)' is not valid base64.") }
        return .data(data)
    }
    return .data(Data(raw.utf8))
}

/// The search-only flags of get, update and delete.
struct SearchOptions: ParsableArguments {
    @Option(help: "Which items by kSecAttrSynchronizable: no (Apple's default), yes or any.")
    var sync: SynchronizableMatch = .no
    @Option(
        help: ArgumentHelp(
            "Search by kSecAttrAccessible as well (a mismatch hides the item: the phantom mismatch).", valueName: "CLASS"))
    var accessible: ProtectionClass?
    @Option(
        help: ArgumentHelp(
            "kSecValuePersistentRef: the item's persistent reference, as --json prints it (persistentRef, base64); it names its class too.",
            valueName: "BASE64"),
        transform: Checked.persistentReference)
    var persistentRef: PersistentReference?

    /// An update or delete that names no attribute, group or protection class touches every
    /// item of its class the app sees (Apple's semantics): the command line asks for `--all`.
    func requireNarrowed(_ attributes: ItemAttributes, all: Bool, verb: String, app: String) throws {
        guard !all, try attributes.attributes().isEmpty, attributes.group == nil, accessible == nil, persistentRef == nil else { return }
        throw ValidationError(
            """
            with no attribute this would \(verb) every \(attributes.itemClass.name) item \(app) sees; \
            narrow it (--account, --service, --label, --attr ...) or add --all to mean every one.
            """)
    }

    /// Runs `search` and, when it finds nothing, says so with a hint if a synchronizable item
    /// would have matched: Apple's queries leave them out unless asked, the first wall after a
    /// first sync.
    func hintingSynchronizable<Answer>(
        _ query: ItemQuery, app: String, on client: NodeClient, _ search: () async throws -> Answer
    ) async throws -> Answer {
        do {
            return try await search()
        } catch let error as KeychainError where error.status == .itemNotFound && sync == .no {
            var anySync = query
            anySync.synchronizable = .any
            anySync.returning = .attributes
            anySync.matchLimit = .one
            anySync.authentication = AuthenticationContext(skipsItemsNeedingAuthentication: true)
            guard let found: NodeAPI.Items = try? await client.call(.copy, NodeAPI.Search(app: app, query: anySync)), !found.items.isEmpty else {
                throw error
            }
            throw KeychainError(
                error.status,
                error.message + " A synchronizable item matches: add --sync yes (or any); Apple's queries leave synchronizable items out unless asked.")
        }
    }

    /// The search these flags and `attributes` describe.
    func query(_ attributes: ItemAttributes) throws -> ItemQuery {
        // A persistent reference names its item's class, as on Apple's platforms.
        var query = ItemQuery(
            persistentRef?.itemClass ?? attributes.itemClass, attributes: try attributes.attributes(), accessGroup: attributes.group,
            protection: accessible, synchronizable: sync, useDataProtectionKeychain: attributes.useDataProtectionKeychain)
        query.persistentReference = persistentRef
        return query
    }
}

extension MacKeychain: ExpressibleByArgument {}

/// `--sync yes|no|any`.
extension SynchronizableMatch: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument {
        case "yes": self = .yes
        case "no": self = .no
        case "any": self = .any
        default: return nil
        }
    }

    public static var allValueStrings: [String] { ["yes", "no", "any"] }
}

/// `--auth`: what the simulated user does when a prompt appears.
enum AuthChoice: ExpressibleByArgument {
    case respond(AuthenticationResponse)
    /// The passcode typed, from the first line of this file (out of the process list).
    case passcodeFile(String)
    /// No prompt may be shown (kSecUseAuthenticationUIFail).
    case none
    /// Items that would need a prompt are left out of the answer (kSecUseAuthenticationUISkip).
    case skip

    init?(argument: String) {
        switch argument {
        case "match": self = .respond(.biometryMatch)
        case "nomatch": self = .respond(.biometryNoMatch)
        case "cancel": self = .respond(.cancel)
        case "none": self = .none
        case "skip": self = .skip
        default:
            if argument.hasPrefix("passcode-file:") {
                self = .passcodeFile(String(argument.dropFirst("passcode-file:".count)))
            } else if argument.hasPrefix("passcode:") {
                self = .respond(.passcode(String(argument.dropFirst("passcode:".count))))
            } else {
                return nil
            }
        }
    }

    static var allValueStrings: [String] { ["match", "nomatch", "cancel", "passcode:CODE", "passcode-file:FILE", "none", "skip"] }

    static func context(_ choices: [AuthChoice]) throws -> AuthenticationContext {
        var context = AuthenticationContext()
        for choice in choices {
            switch choice {
            case .respond(let response): context.responses.append(response)
            case .passcodeFile(let file): context.responses.append(.passcode(try PasscodeInput.read(file: file)))
            case .none: context.interactionAllowed = false
            case .skip: context.skipsItemsNeedingAuthentication = true
            }
        }
        return context
    }
}
