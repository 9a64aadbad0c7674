import FoundationEssentials
public import KeychainModel

extension Keychain {
    /// Lists every live item (but the device's own), class by class and protection class by
    /// protection class, so that a locked class hides only its own items, and a damaged row only
    /// itself (named in `damaged`). Never returns secrets.
    public func list() throws -> ItemListing {
        var listing = ItemListing(items: [], unavailable: [])
        for protection in ProtectionClass.allCases {
            for itemClass in ItemClass.allCases where itemClass != .identity {
                let query = ItemQuery(itemClass, protection: protection, synchronizable: .any, matchLimit: .all, returning: .attributes)
                do {
                    listing.items += try copy(query, damaged: &listing.damaged)
                } catch let error as KeychainError where error.status == .itemNotFound || error.status == .decode {
                    continue  // Nothing here, or only damaged rows (named already).
                } catch let error as KeychainError where error.status == .interactionNotAllowed || error.status == .notAvailable {
                    // The class key is missing, so every other class of this protection is sealed too.
                    listing.unavailable.append(protection)
                    break
                }
            }
        }
        listing.items.removeAll { $0.accessGroup == Device.ownAccessGroup }
        listing.items.sort { ($0.creationDate, $0.uuid.uuidString) < ($1.creationDate, $1.uuid.uuidString) }
        return listing
    }
}
