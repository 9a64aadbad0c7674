import KeychainModel

/// A Mac's two keychains, as an app's calls reach them (`MacKeychain`). This keychain is the
/// data protection one; the file-based one is the same engine over the app's own group, which
/// needs no entitlement, as a Mac's file-based keychain needs none.
extension Keychain {
    /// Where an add goes when it is not to this keychain: nil on any other device, or when the
    /// add needs the data protection keychain.
    func fileBasedKeychain(for item: NewItem) -> Keychain? {
        guard let fileBasedGroup, item.macKeychain == .fileBased else { return nil }
        return Keychain(device: device, scope: .groups([fileBasedGroup]))
    }

    /// Runs a search, update or delete on the keychains of a Mac it reaches, and answers as
    /// Apple's shim does (`SecItemMergeResults`): when both are reached and the data protection
    /// keychain fails (for an app without entitlements among others), with the file-based
    /// answer; when only the file-based one fails, with the data protection answer; when both
    /// succeed, with `merge` of the two. Nil on any other device.
    func onMacKeychains<T>(
        _ query: ItemQuery, changing: Bool, _ call: (Keychain, MacKeychain, ItemQuery) throws -> T, merge: (T, T) -> T
    ) throws -> T? {
        guard let fileBasedGroup else { return nil }
        let targets = query.macKeychains
        let dataProtection = Keychain(device: device, scope: scope, groupHashes: scopeAndHashes.1)
        let fileBased = Keychain(device: device, scope: .groups([fileBasedGroup]))
        let fromDataProtection = targets.contains(.dataProtection) ? Result { try call(dataProtection, .dataProtection, query) } : nil
        let fromFileBased =
            targets.contains(.fileBased) ? Result { try call(fileBased, .fileBased, try query.forFileBasedKeychain(changing: changing)) } : nil
        switch (fromDataProtection, fromFileBased) {
        case (.success(let a)?, .success(let b)?): return merge(a, b)
        case (.success(let a)?, .failure?): return a
        case (.failure?, let other?): return try other.get()
        case (let only?, nil), (nil, let only?): return try only.get()
        case (nil, nil): throw KeychainError(.param, "the call reaches neither keychain of the Mac.")
        }
    }
}
