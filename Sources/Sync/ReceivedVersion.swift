import Foundation
import KeychainModel
import KeychainStore
import SyncWire

/// A version another member sent, opened as far as this member needs: the item without its
/// secret to check and merge, the stamp the merge rule compares, and the seal it is stored by.
struct Received: Sendable {
    /// The item; its data only from a format 1 envelope, which carries it opened.
    var item: SyncedItem
    var stamp: VersionStamp
    /// The item as its author's keychain sealed it (format 2), opened: stored as it came.
    var sealed: ItemSeal.Opened?

    /// Format 2: the metadata is opened, and the secret checked, before anything is written.
    /// A seal that does not open, or that carries access control or a biometry binding (which
    /// never sync), is refused.
    init(_ contents: SealedEnvelope.Contents) throws(EnvelopeError) {
        switch contents {
        case .whole(let item):
            self.item = item
            stamp = item.stamp
            sealed = nil
        case .keyed(let keyed):
            let seal = ItemSeal(key: keyed.key, metadata: keyed.metadata, secret: keyed.secret)
            let what = "item \(keyed.uuid)"
            guard let opened = try? seal.opened(uuid: keyed.uuid, itemClass: keyed.itemClass, protection: keyed.protection, synchronizable: true)
            else { throw .inconsistent("\(what): its metadata does not open under its item key") }
            guard opened.record.accessControl == nil, !opened.biometryBound else {
                throw .inconsistent("\(what) carries access control, which does not sync")
            }
            guard keyed.isTombstone || (try? opened.secret()) != nil else { throw .inconsistent("\(what): its secret does not open under its item key") }
            item = SyncedItem(version: keyed.version, isTombstone: keyed.isTombstone, record: opened.record)
            stamp = keyed.stamp
            sealed = opened
        }
    }
}
