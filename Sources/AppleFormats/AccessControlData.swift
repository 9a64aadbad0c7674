package import Foundation

/// An item's access control as Apple keeps it (the `accc` attribute): what
/// `SecAccessControlCopyData` writes, a DER property list of the protection class (`prot`) and
/// the ACL (`acl`), which maps operations (`od` decrypt, `osgn` sign, `ock` compute a key,
/// `dacl` the default for the rest) to `true`, `false` or a constraint: a dictionary naming
/// what the user must do (`cbio` biometry, `cup` the passcode, `cpol` a policy such as
/// DeviceOwnerAuthentication, `pkofn` k of them). Source: Apple's Security,
/// `keychain/SecAccessControl.c` (`SecAccessControlCreateWithFlags`, `SecAccessControlGetConstraint`).
package enum AccessControlData {
    /// Whether using the item (its secret, or its key to sign or agree) waits for the user, or
    /// is never allowed. No ACL means everything is allowed.
    package static func asksForUser(_ data: Data) throws -> Bool {
        guard let top = try DERPropertyList.decode(data).dictionary else {
            throw PropertyListError("its access control (accc) is not a dictionary")
        }
        guard let acl = top["acl"]?.dictionary else { return false }
        let fallback = acl["dacl"] ?? .boolean(true)
        return ["od", "osgn", "ock"].contains { operation in
            switch acl[operation] ?? fallback {
            case .boolean(true): false
            default: true  // a constraint on the user, or `false`: never without the user
            }
        }
    }
}
