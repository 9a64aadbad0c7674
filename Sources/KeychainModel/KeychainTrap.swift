/// A keychain call written in a way that loses or exposes secrets on real devices, though it
/// works on a developer's unlocked phone and in the Simulator.
public enum KeychainTrap: String, Codable, CaseIterable, Sendable {
    case accessibilityInSearch
    case noAccessibilityOnAdd
    case deprecatedAlways
    case deleteAfterLockedRead
    case synchronizableThisDeviceOnly
    case unhandledDuplicate
    case mainThreadCall

    /// A short name for listings.
    public var title: String {
        switch self {
        case .accessibilityInSearch: "kSecAttrAccessible in a search"
        case .noAccessibilityOnAdd: "no accessibility on add"
        case .deprecatedAlways: "deprecated Always accessibility"
        case .deleteAfterLockedRead: "delete after a locked read"
        case .synchronizableThisDeviceOnly: "synchronizable and ThisDeviceOnly"
        case .unhandledDuplicate: "duplicate add not handled"
        case .mainThreadCall: "keychain call on the main thread"
        }
    }

    /// Why the call is a trap, and what to write instead.
    public var why: String {
        switch self {
        case .accessibilityInSearch:
            "The search only matches items stored with that exact class: an item stored with another one is not found (-25300), yet adding it again fails as a duplicate (-25299). Search by class, service and account; set kSecAttrAccessible on add or in the update dictionary."
        case .noAccessibilityOnAdd:
            "The item gets kSecAttrAccessibleWhenUnlocked, so background work while the phone is locked fails with -25308. Say the class you need, such as kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly."
        case .deprecatedAlways:
            "kSecAttrAccessibleAlways and AlwaysThisDeviceOnly are deprecated since iOS 12: the item is readable before the first unlock, protected by the hardware key alone. Use AfterFirstUnlock."
        case .deleteAfterLockedRead:
            "-25308 means the item exists but the device is locked; deleting it then destroys a secret the app could have read after unlock. Retry when protected data is available."
        case .synchronizableThisDeviceOnly:
            "The call succeeds, but a ThisDeviceOnly item never leaves the device: the sync engine skips it without a word, so the other devices never see it. Pick one: AfterFirstUnlock to sync, ThisDeviceOnly to stay."
        case .unhandledDuplicate:
            "The add failed with -25299 and the code went on without updating or deleting the item, so the new value was never saved. Fall back to SecItemUpdate on -25299."
        case .mainThreadCall:
            "Every SecItem call blocks its thread for an IPC round trip to securityd, and for seconds while a Face ID or passcode prompt waits for the user: on the main actor the UI freezes meanwhile. Make the call from an actor of its own or a background task."
        }
    }
}
