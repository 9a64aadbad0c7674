/// A Mac's two keychains (Apple's TN3137). SecItem reaches the file-based keychain by default
/// and the data protection keychain, the only one iOS has, when `kSecUseDataProtectionKeychain`
/// or `kSecAttrSynchronizable` is true. Which one a call reaches follows Apple's shim in
/// `SecItem.cpp` (`SecItemCategorizeQuery`); Protocol/profiles.md lists the rules.
public enum MacKeychain: String, Codable, Sendable, CaseIterable {
    case dataProtection = "data-protection"
    case fileBased = "file-based"

    /// The access group Keyferry files an app's file-based items under. The file-based keychain
    /// has no access groups (an item's ACL trusts the app that made it); one group per app keeps
    /// each app's items to itself, and no entitlement can name it.
    public static func fileBasedGroup(of bundleID: String) -> String { fileBasedPrefix + bundleID }

    /// Whether an item's group says it lives in a file-based keychain.
    public static func isFileBasedGroup(_ group: String) -> Bool { group.hasPrefix(fileBasedPrefix) }

    /// The app whose file-based keychain a group is; nil for any other group.
    public static func app(ofFileBasedGroup group: String) -> String? {
        isFileBasedGroup(group) ? String(group.dropFirst(fileBasedPrefix.count)) : nil
    }

    private static let fileBasedPrefix = "file-based keychain of "

    /// `kSecAttrAccessGroupToken`: items on a token, which only the data protection keychain has.
    static let tokenGroup = "com.apple.token"

    /// An explicit `kSecUseDataProtectionKeychain` decides. Without one, what only the data
    /// protection keychain has sends a call there alone (an access control, a token: a Secure
    /// Enclave key or the token access group, a synchronizable item); otherwise an add goes to
    /// the file-based keychain and a search, update or delete to both.
    static func targets(useDataProtectionKeychain: Bool?, needsDataProtection: Bool) -> [MacKeychain] {
        switch useDataProtectionKeychain {
        case true?: [.dataProtection]
        case false?: [.fileBased]
        case nil: needsDataProtection ? [.dataProtection] : [.dataProtection, .fileBased]
        }
    }
}

extension NewItem {
    /// The one keychain of a Mac this add reaches. Apple's shim prefers the file-based keychain
    /// and falls back to the data protection one "only when the query is not suitable for
    /// legacy keychain" (`SecItemAdd`).
    public var macKeychain: MacKeychain {
        let needsDataProtection =
            accessControl != nil || synchronizable || attributes[.tokenID] != nil || accessGroup == MacKeychain.tokenGroup
        return MacKeychain.targets(useDataProtectionKeychain: useDataProtectionKeychain, needsDataProtection: needsDataProtection)
            .contains(.fileBased) ? .fileBased : .dataProtection
    }

    /// The item as the file-based keychain keeps it: Apple's shim removes what that keychain has
    /// no column for (`SecItemCopyTranslatedAttributes`): accessibility, access control, access
    /// group and synchronizable. Its items open once the user has logged in, whatever the
    /// screen lock does: Keyferry keeps them in class C.
    public var forFileBasedKeychain: NewItem {
        var item = self
        item.accessGroup = nil
        item.protection = .afterFirstUnlock
        item.accessControl = nil
        item.synchronizable = false
        return item
    }
}

extension ItemQuery {
    /// The keychains of a Mac this search, update or delete reaches, data protection first.
    /// `kSecAttrSynchronizableAny` is not true, so it does not keep a search from the
    /// file-based keychain.
    public var macKeychains: [MacKeychain] {
        let needsDataProtection =
            synchronizable == .yes || attributes[.tokenID] != nil || accessGroup == MacKeychain.tokenGroup
        return MacKeychain.targets(useDataProtectionKeychain: useDataProtectionKeychain, needsDataProtection: needsDataProtection)
    }

    /// The search as the file-based keychain runs it: without the keys it has no column for,
    /// and, for an update or delete (`changing`), touching the first match unless
    /// `kSecMatchLimit` says otherwise: Apple's shim finds what to change or delete with its
    /// own search, whose default limit is one (`SecItemUpdate_osx`, `SecItemDelete_osx`).
    public func forFileBasedKeychain(changing: Bool) throws(KeychainError) -> ItemQuery {
        // "if we're returning all matches, then we don't support getting passwords as data"
        // (`_CreateSecItemParamsFromDictionary`); errSecReturnDataUnsupported is errSecParam.
        if returning.contains(.data), matchLimit == .all, itemClass == .genericPassword || itemClass == .internetPassword {
            throw KeychainError(
                .param,
                "the file-based keychain returns no data for kSecMatchLimitAll on password items; ask for attributes, then for each item's data, or use the data protection keychain."
            )
        }
        var query = self
        query.accessGroup = nil
        query.protection = nil
        query.synchronizable = .no
        if changing, query.matchLimit == nil { query.matchLimit = .one }
        return query
    }
}

extension ItemChanges {
    /// The changes as the file-based keychain takes them: it has no accessibility or access
    /// group to change.
    public var forFileBasedKeychain: ItemChanges {
        var changes = self
        changes.accessGroup = nil
        changes.protection = nil
        return changes
    }
}

extension ItemRecord {
    /// `.fileBased` for an item in a Mac's file-based keychain; nil for every other item.
    public var macKeychain: MacKeychain? { MacKeychain.isFileBasedGroup(accessGroup) ? .fileBased : nil }
}
