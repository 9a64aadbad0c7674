public import Foundation
public import KeychainModel

/// The traps, named and explained in KeychainModel so that `keyferry lint` words them as the
/// audit does.
public typealias KeychainTrap = KeychainModel.KeychainTrap

/// One call that fell into a trap: where in the caller's code, as which app, and when.
public struct TrapRecord: Codable, Sendable, Equatable {
    public var trap: KeychainTrap
    public var function: SecItemFunction
    /// The caller's `#fileID` and line.
    public var file: String
    public var line: Int
    public var app: String
    /// What about this call, when the trap alone does not say (the earlier read, the class).
    public var detail: String?
    public var at: Date
}

/// The four Keychain Services calls on items.
public enum SecItemFunction: String, Codable, Sendable, CaseIterable {
    case add = "SecItemAdd"
    case copyMatching = "SecItemCopyMatching"
    case update = "SecItemUpdate"
    case delete = "SecItemDelete"
}

/// One Keychain Services call as the audit sees it: the dictionaries as the caller wrote them
/// and the status the caller got back.
struct ObservedCall {
    var function: SecItemFunction
    /// The attributes of an add, or the query of the others.
    var dictionary: [String: Any]
    /// The second dictionary of an update.
    var changes: [String: Any] = [:]
    var status: OSStatus
    var site: Site
    /// Made on the main thread (the main actor's), and how long it blocked it.
    var onMainThread = false
    var blocked: Duration = .zero
}

/// Where in the caller's code a call was made.
struct Site: Sendable {
    var function: SecItemFunction
    var file: StaticString
    var line: Int

    /// The file of a call made through a value of Apple's function type, which carries no site.
    static let functionValue: StaticString = "(a call through a function value)"
}

/// Finds the traps in a context's calls, in order. Most traps show in one call; two need the
/// calls around it: a delete right after a read that failed with -25308, and an add that failed
/// with -25299 and was not followed by an update or delete of the same item.
struct TrapDetector: Sendable {
    private var lockedRead: (item: ItemKey, site: Site)?
    private var duplicate: (item: ItemKey, site: Site)?

    /// Hands each trap `call` completes to `record`.
    mutating func observe(_ call: ObservedCall, record: (KeychainTrap, Site, String?) -> Void) {
        // Which item the call names matters only next to a pending read or add.
        var named: ItemKey?
        func item() -> ItemKey {
            if let named { return named }
            named = ItemKey(call.dictionary)
            return named!
        }
        if let pending = duplicate {
            let handled = (call.function == .update || call.function == .delete) && pending.item.overlaps(item())
            let stillLooking = call.function == .copyMatching && pending.item.overlaps(item())
            if handled { duplicate = nil } else if !stillLooking { flush(record: record) }
        }

        if call.onMainThread {
            record(.mainThreadCall, call.site, call.blocked > .zero ? "blocked it for \(call.blocked.milliseconds) ms" : nil)
        }
        switch call.function {
        case .add:
            if call.dictionary[kSecAttrAccessible] == nil && call.dictionary[kSecAttrAccessControl] == nil {
                record(.noAccessibilityOnAdd, call.site, nil)
            }
        case .copyMatching, .update, .delete:
            if let value = call.dictionary[kSecAttrAccessible] {
                record(.accessibilityInSearch, call.site, "searches with \(Convert.protection(value)?.secConstantName ?? "\(value)")")
            }
        }
        for stored in [call.function == .add ? call.dictionary : [:], call.changes] {
            let protection = Self.protection(stored)
            if protection == .always || protection == .alwaysThisDeviceOnly {
                record(.deprecatedAlways, call.site, protection.map { "stores with \($0.secConstantName)" })
            }
            if let protection, protection.isThisDeviceOnly, stored[kSecAttrSynchronizable].flatMap({ try? Convert.bool($0, kSecAttrSynchronizable) }) == true {
                record(.synchronizableThisDeviceOnly, call.site, nil)
            }
        }

        if call.function == .delete, let read = lockedRead, read.item.overlaps(item()) {
            record(.deleteAfterLockedRead, call.site, "the read at \(read.site.file):\(read.site.line) got -25308")
        }
        lockedRead = call.function == .copyMatching && call.status == errSecInteractionNotAllowed ? (item(), call.site) : nil
        if call.function == .add && call.status == errSecDuplicateItem { duplicate = (item(), call.site) }
    }

    /// Reports an add still waiting for its duplicate to be handled: the code has moved on or
    /// the audit is being read.
    mutating func flush(record: (KeychainTrap, Site, String?) -> Void) {
        guard let pending = duplicate else { return }
        duplicate = nil
        record(.unhandledDuplicate, pending.site, nil)
    }

    private static func protection(_ dictionary: [String: Any]) -> ProtectionClass? {
        if let value = dictionary[kSecAttrAccessible] { return Convert.protection(value) }
        return (dictionary[kSecAttrAccessControl] as? AccessControl)?.protection
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// The attributes that name an item, as far as a dictionary gives them; a missing one matches
/// any value, as in a search.
struct ItemKey: Sendable {
    private var parts: [String: String] = [:]

    init(_ dictionary: [String: Any]) {
        for key in [kSecClass, kSecAttrService, kSecAttrAccount, kSecAttrServer, kSecAttrAccessGroup] {
            if let value = dictionary[key] { parts[key] = "\(value)" }
        }
    }

    func overlaps(_ other: ItemKey) -> Bool {
        parts.allSatisfy { key, value in other.parts[key].map { $0 == value } ?? true }
    }
}
