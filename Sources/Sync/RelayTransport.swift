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

/// How a member reaches the relay: push records to a circle's stream, pull them by cursor.
/// `RelayClient` speaks it over HTTP; tests may hold a relay in memory.
public protocol RelayTransport: Sendable {
    /// Returns how many of `bodies` the relay did not hold yet.
    @discardableResult
    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> Int
    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord]
}
