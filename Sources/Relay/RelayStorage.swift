import Foundation
import SyncWire

/// Where a relay keeps what members push: append-only logs per circle and stream. Embedded
/// SQLite is the default (`SQLiteRelayStorage`); a server database (`PostgresRelayStorage`)
/// takes its place when a fleet outgrows one machine, and then several relays share it: a
/// storage keeps every fact a relay decides by, so a relay holds no state of its own.
///
/// Within a stream, cursors only grow, in the order appends commit: a reader that has seen a
/// cursor never misses a record below it that commits later.
public protocol RelayStorage: Sendable {
    /// Appends the records not already held (a retried push stores nothing twice), in order,
    /// and returns how many were new. With `ifLastIs`, it appends only while the stream's
    /// newest record is still at that cursor (0: the stream is empty), and otherwise throws
    /// `RelayStorageConflict` having stored nothing: what the caller checked the records against
    /// has changed (another relay of the same database wrote first).
    func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, ifLastIs expected: UInt64?) async throws -> Int

    /// The records after `cursor`, oldest first, at most `limit`.
    func records(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord]

    /// The bytes of every record held for `circle`, for its quota.
    func byteCount(circle: UUID) async throws -> Int
}

extension RelayStorage {
    /// Appends whatever the stream holds meanwhile.
    public func append(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> Int {
        try await append(bodies, circle: circle, stream: stream, ifLastIs: nil)
    }
}

/// A conditional append found the stream moved on since the caller read it.
public struct RelayStorageConflict: Error, Sendable {
    public init() {}
}

/// The relay's database failed (it is down, full, or refused a statement): the push or pull
/// was not served, and nothing of a push was kept.
public struct RelayStorageError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "the relay's database failed: \(reason)" }
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
