/// Every item a keychain can see, attributes only: what `keyferry item list` shows.
public struct ItemListing: Codable, Sendable {
    public var items: [ItemRecord]
    /// Protection classes whose items exist but cannot be opened in the current lock state.
    public var unavailable: [ProtectionClass]
    /// Items whose rows fail authentication: left out, each named.
    public var damaged: [DamagedItem]

    public init(items: [ItemRecord], unavailable: [ProtectionClass], damaged: [DamagedItem] = []) {
        self.items = items
        self.unavailable = unavailable
        self.damaged = damaged
    }
}
