import Foundation
import KeychainModel
import KeyferryCrypto
package import SyncWire

/// The bytes of the relay's HTTP bodies (Protocol/relay.md): a push is a list of
/// records, a pull answers records with their cursors.
package enum RelayWire {
    package static let version = "v1"
    /// A push larger than this is refused whole.
    package static let maximumPushBytes = 16 << 20
    /// The most records one pull answers, and their most bytes (but always one record).
    package static let maximumPullRecords = 10_000
    package static let maximumPullBytes = 32 << 20
    /// The largest record the relay keeps: an envelope of a large item, with room to spare.
    package static let maximumRecordBytes = 4 << 20
    /// The largest membership entry a relay keeps: an entry is a name of at most 64 bytes, two
    /// keys and a signature, a few hundred bytes; every member and the relay keep them all.
    package static let maximumMembershipRecordBytes = 4 << 10

    /// `(u32 length | bytes)*`
    package static func encodePush(_ bodies: [[UInt8]]) -> [UInt8] {
        var w = ByteWriter(capacity: bodies.reduce(0) { $0 + 4 + $1.count })
        for body in bodies { w.lengthPrefixed(body) }
        return w.bytes
    }

    package static func decodePush(_ bytes: [UInt8]) throws -> [[UInt8]] {
        var r = ByteReader(bytes)
        var bodies: [[UInt8]] = []
        while !r.isAtEnd { bodies.append(Array(try r.lengthPrefixed())) }
        return bodies
    }

    /// The headers of a member's signature on a push (`PushProof`), each in hex.
    package static let signerHeader = "Keyferry-Signer"
    package static let signatureHeader = "Keyferry-Signature"

    /// The header of the admission token a push that creates a circle carries, for a relay
    /// that admits only holders of one (`relay serve --admission token FILE`).
    package static let admissionHeader = "Keyferry-Admission"

    /// The proof a push's headers carry: nil when it carries none, and a refusal when they are
    /// not a 32-byte key and a 64-byte signature in hex.
    package static func proof(signer: String?, signature: String?) throws -> PushProof? {
        guard signer != nil || signature != nil else { return nil }
        guard let signerBytes = signer.flatMap(Hex.decode), let key = try? SigningPublicKey(bytes: signerBytes),
            let signatureBytes = signature.flatMap(Hex.decode), signatureBytes.count == SigningKey.signatureByteCount
        else {
            throw RelayRefusal(kind: .malformed, reason: "\(signerHeader) and \(signatureHeader) are a signing key and a signature in hex")
        }
        return PushProof(signer: key, signature: signatureBytes)
    }

    /// `(u64 cursor | u32 length | bytes)*`
    package static func encodePull(_ records: [RelayRecord]) -> [UInt8] {
        var w = ByteWriter(capacity: records.reduce(0) { $0 + 12 + $1.body.count })
        for record in records {
            w.uint64(record.cursor)
            w.lengthPrefixed(record.body)
        }
        return w.bytes
    }

    package static func decodePull(_ bytes: [UInt8]) throws -> [RelayRecord] {
        var r = ByteReader(bytes)
        var records: [RelayRecord] = []
        while !r.isAtEnd { records.append(RelayRecord(cursor: try r.uint64(), body: Array(try r.lengthPrefixed()))) }
        return records
    }
}
