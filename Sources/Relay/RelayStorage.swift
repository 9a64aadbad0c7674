import Foundation

/// The logs a relay keeps for each circle, each read by cursor. The relay learns from them only
/// what an envelope's header says; see Protocol/sync.md, "Relay".
public enum RelayStream: String, Sendable, CaseIterable {
    /// Signed membership entries, in the order members pushed them.
    case membership
    /// Key generations: class keys wrapped under the circle key, and signed shares.
    case keys
    /// Sealed, signed item envelopes.
    case envelopes
}

/// One record of a log: its cursor (increasing, never reused) and its bytes.
public struct RelayRecord: Hashable, Sendable {
    public var cursor: UInt64
    public var body: [UInt8]

    public init(cursor: UInt64, body: [UInt8]) {
        self.cursor = cursor
        self.body = body
    }
}

/// Where a relay keeps what members push: append-only logs per circle and stream. Embedded
/// SQLite is the default (`SQLiteRelayStorage`); a server database takes its place behind this
/// interface when a fleet outgrows one machine.
public protocol RelayStorage: Sendable {
    /// Appends the records not already held (a retried push stores nothing twice), in order.
    /// Returns how many were new.
    func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) throws -> Int

    /// The records after `cursor`, oldest first, at most `limit`.
    func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) throws -> [RelayRecord]
}
