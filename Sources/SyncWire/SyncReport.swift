/// What one pass of a member's sync did: what it pushed, applied, refused and left waiting.
public struct SyncReport: Equatable, Sendable, Codable {
    /// Local writes sealed and pushed.
    public var pushed = 0
    /// Versions received that won and were written.
    public var applied = 0
    /// Versions received that lost to what this device holds, or that it already held.
    public var superseded = 0
    /// Records refused (envelopes one by one or a whole batch at once, membership entries, key
    /// records), never applied: the first reasons, and how many in all. A flood of junk on the
    /// relay makes the count grow, never the report.
    public var rejected: [String] = []
    public var rejectedCount = 0
    /// Class A items received while locked: kept sealed until unlock.
    public var waitingForUnlock = 0
    /// Local class A changes sealed in this lock state: pushed at unlock, with the time they
    /// were made as their version.
    public var waitingToPush = 0
    /// Synchronizable ThisDeviceOnly items seen in the change feed: they stay here.
    public var skippedDeviceBound = 0
    /// Versions received whose primary key a device-bound item holds here: that item stays,
    /// and the version is not written (replication never replaces a ThisDeviceOnly item).
    public var keptDeviceBound = 0
    /// Local items not pushed because their stored rows fail authentication (damaged or
    /// edited), named; the rest of the feed is pushed.
    public var damaged: [String] = []
    /// The pass stopped at its bound with more on the relay: run the next one at once.
    public var more = false
    /// The relay had let go of deletions this member had not seen (it was away longer than the
    /// relay keeps them), so the pass read every envelope again from the start.
    public var resynced = false
    /// Items a resync found the circle no longer holds, tombstoned here (never pushed).
    public var forgottenInResync = 0

    /// Reasons a report keeps.
    public static let keptReasons = 16

    public init() {}

    public mutating func reject(_ reason: String) {
        rejectedCount += 1
        if rejected.count < Self.keptReasons { rejected.append(reason) }
    }

    public mutating func reject(_ reasons: [String]) { reasons.forEach { reject($0) } }
}
