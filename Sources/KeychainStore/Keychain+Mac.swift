import Foundation
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
        let dataProtection = dataProtectionKeychain
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

    /// This keychain without the routing: the data protection keychain alone.
    private var dataProtectionKeychain: Keychain { Keychain(device: device, scope: scope, groupHashes: scopeAndHashes.1) }

    /// An update that makes file-based items synchronizable moves them, as Apple's shim does
    /// (`SecItemChangeSynchronizability`): each match (the first, unless `kSecMatchLimit` says
    /// otherwise) is added to the data protection keychain, synchronizable and with the
    /// changes, or updates the item already there under its key; then it leaves `fileBased`.
    func moveToDataProtection(_ query: ItemQuery, with changes: ItemChanges, from fileBased: Keychain) throws -> Int {
        var read = query
        read.returning = [.data, .attributes]
        let records = try fileBased.copy(read)
        let dataProtection = dataProtectionKeychain
        var moved = changes
        moved.synchronizable = nil
        for record in records {
            let item = NewItem(
                record.itemClass, attributes: record.attributes.merging(changes.attributes) { $1 }, data: changes.data ?? record.data ?? Data(),
                accessGroup: changes.accessGroup, protection: changes.protection, synchronizable: true)
            do {
                try dataProtection.add(item)
            } catch let error as KeychainError where error.status == .duplicateItem {
                let primaryKey = Dictionary(uniqueKeysWithValues: item.itemClass.primaryKey.compactMap { key in item.attributes[key].map { (key, $0) } })
                let group = try dataProtection.groupForWriting(changes.accessGroup)
                try dataProtection.update(ItemQuery(item.itemClass, attributes: primaryKey, accessGroup: group, synchronizable: .yes), with: moved)
            }
            _ = try fileBased.deleteMatches(ItemQuery(record.itemClass, synchronizable: .any, persistentReference: record.persistentReference))
        }
        return records.count
    }
}
