/// What one pass of a member's sync did: what it pushed, applied, refused and left waiting.
public struct SyncReport: Equatable, Sendable, Codable {
    /// Local writes sealed and pushed.
    public var pushed = 0
    /// Versions received that won and were written.
    public var applied = 0
    /// Versions received that lost to what this device holds, or that it already held.
    public var superseded = 0
    /// Records refused (envelopes one by one or a whole batch at once, membership entries, key
    /// records), never applied: the first refusals, and how many in all. A flood of junk on the
    /// relay makes the count grow, never the report.
    public var rejected: [Refusal] = []
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

    public mutating func reject(_ refusal: Refusal) {
        rejectedCount += 1
        if rejected.count < Self.keptReasons { rejected.append(refusal) }
    }

    public mutating func reject(_ reason: Refusal.Reason, _ detail: String) { reject(Refusal(reason, detail)) }

    public mutating func reject(_ refusals: [Refusal]) { refusals.forEach { reject($0) } }

    /// Adds what `later` did to this report: what a node's own passes did between two reports.
    public mutating func absorb(_ later: SyncReport) {
        pushed += later.pushed
        applied += later.applied
        superseded += later.superseded
        for refusal in later.rejected { reject(refusal) }
        rejectedCount += later.rejectedCount - later.rejected.count
        waitingForUnlock = later.waitingForUnlock
        waitingToPush = later.waitingToPush
        skippedDeviceBound = later.skippedDeviceBound
        keptDeviceBound += later.keptDeviceBound
        damaged = Array(Set(damaged + later.damaged)).sorted()
        more = later.more
        resynced = resynced || later.resynced
        forgottenInResync += later.forgottenInResync
    }
}

/// A record a member refused, never applied: a stable name to branch on, and a sentence.
/// Protocol/sync.md, "Refusals", lists the names.
public struct Refusal: Equatable, Hashable, Sendable, Codable, CustomStringConvertible {
    public enum Reason: String, Equatable, Hashable, Sendable, Codable, CaseIterable {
        /// Not a record of its stream: short, trailing bytes, bad magic, an unknown class, an
        /// envelope naming another author or circle than its batch.
        case malformed
        /// A format this build does not read: its author runs another version of Keyferry.
        case unsupportedFormat
        /// A signature that does not verify: edited on the way, or not written by its author.
        case forged
        /// Written by a device that is not (or no longer) a member.
        case notAMember
        /// For another circle, or a key generation this member does not hold; seals that do
        /// not open.
        case cannotDecrypt
        /// The sealed item disagrees with its signed header, or is not an item a device could add.
        case inconsistent
        /// A membership entry that does not extend the circle's history.
        case invalidHistory
        /// A key record for a generation no membership entry started.
        case unknownGeneration
        /// A second, different key set for a generation: the first stays.
        case conflictingKeys
        /// A received version this device could not write (its keychain refused it).
        case unwritable
    }

    public var reason: Reason
    public var detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    /// `forged: the batch's signature does not verify`.
    public var description: String { "\(reason.rawValue): \(detail)" }
}
