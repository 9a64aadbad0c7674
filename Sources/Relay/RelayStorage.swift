import Foundation
import SyncWire

/// Where a relay keeps what members push: append-only logs per circle and stream. Embedded
/// SQLite is the default (`SQLiteRelayStorage`); a server database takes its place behind this
/// interface when a fleet outgrows one machine.
public protocol RelayStorage: Sendable {
    /// Appends the records not already held (a retried push stores nothing twice), in order.
    /// Returns how many were new.
    func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) throws -> Int

    /// The records after `cursor`, oldest first, at most `limit`.
    func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) throws -> [RelayRecord]

    /// The bytes of every record held for `circle`, for its quota.
    func byteCount(circle: UUID) throws -> Int
}

/// A relay inside this process: the storage a relay server keeps, and its checks, with no
/// network between. For a circle on scratch devices, such as the survival matrix's iCloud
/// Keychain path, or a test's `SyncCircle`.
public struct LocalRelay: RelayTransport {
    private let keeper: RelayKeeper

    public init(storage: any RelayStorage, quota: Int = RelayKeeper.defaultQuota) {
        keeper = RelayKeeper(storage: storage, quota: quota)
    }

    public func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        do {
            return try await keeper.push(bodies, circle: circle, stream: stream, proof: proof)
        } catch let refusal as RelayRefusal {
            throw RelayError.refused(refusal.reason)
        }
    }

    public func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord] {
        try await keeper.records(circle: circle, stream: stream, after: cursor, limit: limit)
    }
}
