import Foundation
import Sync

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
