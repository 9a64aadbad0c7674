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

/// A relay inside this process: the storage a relay server keeps, with no network between.
/// For a circle on scratch devices, such as the survival matrix's iCloud Keychain path.
public struct LocalRelay: RelayTransport {
    private let storage: any RelayStorage

    public init(storage: any RelayStorage) {
        self.storage = storage
    }

    public func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> Int {
        try storage.append(bodies, circle: circle, stream: stream)
    }

    public func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        try storage.records(circle: circle, stream: stream, after: cursor, limit: limit)
    }
}
