package import Foundation
import KeychainModel
package import KeyferryCrypto

/// The logs a relay keeps for each circle, each read by cursor. The relay learns from them only
/// what an envelope's header says; see Protocol/relay.md.
package enum RelayStream: String, Sendable, CaseIterable {
    /// Signed membership entries, in the order members pushed them.
    case membership
    /// Key generations: class keys wrapped under the circle key, and signed shares.
    case keys
    /// Sealed, signed item envelopes.
    case envelopes
    /// Devices asking to join (signed by themselves), and members' answers: vouchers and
    /// declines (`JoinRecord`). Short-lived: the relay lets go of a request once it expires.
    case joins
}

/// One record of a log: its cursor (increasing, never reused) and its bytes.
package struct RelayRecord: Hashable, Sendable {
    package var cursor: UInt64
    package var body: [UInt8]

    package init(cursor: UInt64, body: [UInt8]) {
        self.cursor = cursor
        self.body = body
    }
}

/// A member's signature over one push: the relay keeps `keys` and `envelopes` records only
/// from a member of the circle (a membership entry is its own credential), so strangers and
/// removed members cannot write there. A push replayed stores nothing new.
package struct PushProof: Hashable, Sendable {
    package var signer: SigningPublicKey
    package var signature: [UInt8]

    package init(signing bodies: [[UInt8]], circle: UUID, stream: RelayStream, key: SigningKey) {
        signer = key.publicKey
        signature = key.signature(for: Self.signedBytes(bodies, circle, stream))
    }

    package init(signer: SigningPublicKey, signature: [UInt8]) {
        self.signer = signer
        self.signature = signature
    }

    package func holds(for bodies: [[UInt8]], circle: UUID, stream: RelayStream) -> Bool {
        signer.isValidSignature(signature, for: Self.signedBytes(bodies, circle, stream))
    }

    /// A member's word that it has applied the circle's envelopes through `cursor`, so that
    /// the relay may drop deletions every member has seen (Protocol/relay.md, "Compaction").
    package init(acknowledging cursor: UInt64, circle: UUID, key: SigningKey) {
        signer = key.publicKey
        signature = key.signature(for: Self.acknowledgedBytes(cursor, circle))
    }

    package func holds(acknowledging cursor: UInt64, circle: UUID) -> Bool {
        signer.isValidSignature(signature, for: Self.acknowledgedBytes(cursor, circle))
    }

    /// `"keyferry.relay.ack.v1" | circle uuid | cursor u64`
    private static func acknowledgedBytes(_ cursor: UInt64, _ circle: UUID) -> [UInt8] {
        var w = ByteWriter(capacity: 48)
        w.raw("keyferry.relay.ack.v1".utf8)
        w.uuid(circle)
        w.uint64(cursor)
        return w.bytes
    }

    /// `"keyferry.relay.push.v1" | circle uuid | stream string | count u32 | (BLAKE2b-256 of a record)*`
    private static func signedBytes(_ bodies: [[UInt8]], _ circle: UUID, _ stream: RelayStream) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + 32 * bodies.count)
        w.raw("keyferry.relay.push.v1".utf8)
        w.uuid(circle)
        w.string(stream.rawValue)
        w.uint32(UInt32(bodies.count))
        for body in bodies { w.raw(ContentDigest.of(body)) }
        return w.bytes
    }
}

/// How a member reaches the relay: push records to a circle's stream, pull them by cursor.
/// `RelayClient` speaks it over HTTP; tests may hold a relay in memory.
package protocol RelayTransport: Sendable {
    /// Returns how many of `bodies` the relay did not hold yet. `proof` is required on the
    /// `keys` and `envelopes` streams.
    @discardableResult
    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int
    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord]
    /// Tells the relay this member applied the circle's envelopes through `cursor`.
    func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws
    /// The deletions the relay let go (each item's UUID and the deletion's version), by UUID,
    /// after `item`, at most `limit`: what a member that resyncs deletes here.
    func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion]
}

extension RelayTransport {
    /// A relay that keeps every version (a test's, in memory) has no use for acknowledgements.
    package func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws {}
    /// Nor does it forget a deletion.
    package func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] { [] }
}

/// A deletion a relay let go of once its members had seen it (Protocol/relay.md,
/// "Compaction"): the item and the version that deleted it, as its envelope's header said.
package struct ForgottenDeletion: Equatable, Sendable {
    package var item: UUID
    package var version: HybridTimestamp

    package init(item: UUID, version: HybridTimestamp) {
        self.item = item
        self.version = version
    }

    /// `(item uuid | milliseconds u64 | counter u32)*`, 28 bytes each.
    package static func encode(_ deletions: [ForgottenDeletion]) -> [UInt8] {
        var w = ByteWriter(capacity: 28 * deletions.count)
        for deletion in deletions {
            w.uuid(deletion.item)
            w.uint64(deletion.version.milliseconds)
            w.uint32(deletion.version.counter)
        }
        return w.bytes
    }

    package static func decode(_ bytes: [UInt8]) throws -> [ForgottenDeletion] {
        var r = ByteReader(bytes)
        var deletions: [ForgottenDeletion] = []
        while !r.isAtEnd {
            deletions.append(ForgottenDeletion(item: try r.uuid(), version: HybridTimestamp(milliseconds: try r.uint64(), counter: try r.uint32())))
        }
        return deletions
    }
}
