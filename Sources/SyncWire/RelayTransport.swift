import Foundation
import KeychainModel
import KeyferryCrypto

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

/// A member's signature over one push: the relay keeps `keys` and `envelopes` records only
/// from a member of the circle (a membership entry is its own credential), so strangers and
/// removed members cannot write there. A push replayed stores nothing new.
public struct PushProof: Hashable, Sendable {
    public var signer: SigningPublicKey
    public var signature: [UInt8]

    public init(signing bodies: [[UInt8]], circle: UUID, stream: RelayStream, key: SigningKey) {
        signer = key.publicKey
        signature = key.signature(for: Self.signedBytes(bodies, circle, stream))
    }

    public init(signer: SigningPublicKey, signature: [UInt8]) {
        self.signer = signer
        self.signature = signature
    }

    public func holds(for bodies: [[UInt8]], circle: UUID, stream: RelayStream) -> Bool {
        signer.isValidSignature(signature, for: Self.signedBytes(bodies, circle, stream))
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
public protocol RelayTransport: Sendable {
    /// Returns how many of `bodies` the relay did not hold yet. `proof` is required on the
    /// `keys` and `envelopes` streams.
    @discardableResult
    func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int
    func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int) async throws -> [RelayRecord]
}

/// Why a relay call failed: no answer (worth asking again later), a refusal, or a relay that
/// cannot serve.
public enum RelayError: CodedError, Equatable {
    public static let domain = "relay"

    case unreachable(String)
    case refused(String)
    /// The relay itself could not bind its address.
    case cannotListen(String)

    public enum Code: String, Sendable {
        case unreachable, refused, cannotListen
    }

    public var code: Code {
        switch self {
        case .unreachable: .unreachable
        case .refused: .refused
        case .cannotListen: .cannotListen
        }
    }

    public var kind: ProblemKind {
        switch self {
        case .unreachable: .unavailable
        case .refused: .failure
        case .cannotListen: .unavailable
        }
    }

    public var message: String { description }

    public var description: String {
        switch self {
        case .unreachable(let why): "the relay cannot be reached: \(why)"
        case .refused(let why): "the relay refused the request: \(why)"
        case .cannotListen(let why): "the relay cannot listen on \(why)"
        }
    }
}
