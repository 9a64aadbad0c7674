package import Foundation
import KeychainModel
package import KeyferryCrypto

/// A device's request to join a circle, published on the circle's `joins` stream and signed by
/// the device itself: what a member sees in `circle requests`, with the short code both sides
/// print. It grants nothing: only a member's voucher admits the device. See Protocol/sync.md,
/// "Joining from another machine".
package struct JoinRequest: Hashable, Sendable {
    package var circle: UUID
    package var peer: PeerIdentity
    /// When the device made the request and when it stops waiting, by its own clock, in
    /// milliseconds since 1970 as the record holds them.
    var madeMilliseconds: UInt64
    var expiresMilliseconds: UInt64
    var signature: [UInt8]

    package var made: Date { Self.date(milliseconds: madeMilliseconds) }
    package var expires: Date { Self.date(milliseconds: expiresMilliseconds) }

    static let magic = Array("KFJR".utf8)
    static let format: UInt8 = 1
    /// The longest a request may wait: a member answers while its device shows the code.
    package static let longestLifetime: TimeInterval = 3_600

    package init(circle: UUID, name: String, identity: DeviceIdentity, made: Date, lifetime: TimeInterval) throws {
        try PeerIdentity.check(name: name)
        guard lifetime > 0, lifetime <= Self.longestLifetime else {
            throw CircleError(.invalidRequest, "a join request waits between a second and \(Int(Self.longestLifetime / 60)) minutes")
        }
        self.circle = circle
        peer = identity.peer(named: name)
        madeMilliseconds = Self.milliseconds(made)
        expiresMilliseconds = madeMilliseconds + UInt64(lifetime * 1_000)
        signature = []
        signature = identity.signingKey.signature(for: signedBytes)
    }

    /// What names this request in a member's voucher or decline: BLAKE2b-256 of its bytes.
    package var digest: [UInt8] { ContentDigest.of(bytes) }
    /// The code the device and the members print, to compare before a member approves.
    package var code: JoinCode { JoinCode(peer) }

    package func hasExpired(at now: Date) -> Bool { Self.milliseconds(now) >= expiresMilliseconds }

    package var bytes: [UInt8] { signedBytes + signature }

    /// Reads a request and checks its own signature and lifetime: anything that parses here
    /// was made by the device whose keys it names.
    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("not a join request") }
            let format = try r.uint8()
            guard format == Self.format else { throw EnvelopeError.unsupportedFormat(format) }
            circle = try r.uuid()
            let name = try r.string()
            let signing = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            let sealing = try SealingPublicKey(bytes: Array(try r.raw(SealingPublicKey.byteCount)))
            peer = PeerIdentity(name: name, signing: signing, sealing: sealing)
            madeMilliseconds = try r.uint64()
            expiresMilliseconds = try r.uint64()
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a join request") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a join request is truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("a join request names a key of the wrong length")
        }
        guard (try? PeerIdentity.check(name: peer.name)) != nil else {
            throw EnvelopeError.malformed("a join request names its device in 1 to \(PeerIdentity.maximumNameBytes) bytes")
        }
        guard madeMilliseconds <= Self.latestMilliseconds, expiresMilliseconds > madeMilliseconds,
            expiresMilliseconds - madeMilliseconds <= UInt64(Self.longestLifetime * 1_000)
        else {
            throw EnvelopeError.malformed("a join request is made before the year 10000 and waits at most \(Int(Self.longestLifetime)) s")
        }
        guard peer.signing.isValidSignature(signature, for: signedBytes) else {
            throw EnvelopeError.forged("a join request is not signed by the device it names")
        }
    }

    /// `"KFJR" | format u8 (1) | circle uuid (16) | name string | signing key (32) | encryption key (32)
    /// | made u64 | expires u64` (milliseconds since 1970).
    private var signedBytes: [UInt8] {
        var w = ByteWriter(capacity: 200)
        w.raw(Self.magic)
        w.uint8(Self.format)
        w.uuid(circle)
        w.string(peer.name)
        w.raw(peer.signing.bytes)
        w.raw(peer.sealing.bytes)
        w.uint64(madeMilliseconds)
        w.uint64(expiresMilliseconds)
        return w.bytes
    }

    /// The end of year 9999: no clock makes a request later, and a reader refuses one.
    static let latestMilliseconds: UInt64 = 253_402_300_799_999

    static func milliseconds(_ date: Date) -> UInt64 {
        UInt64(min(Double(latestMilliseconds), max(0, (date.timeIntervalSince1970 * 1_000).rounded(.down))))
    }
    static func date(milliseconds: UInt64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1_000) }
}

/// Six digits both sides print, made from the joining device's two public keys: a member
/// approves the request whose code the device shows, so a stranger's request under the same
/// name is not taken for it. A stranger who makes keys until the code matches is caught by the
/// other side of the rule: a code two pending requests share is approved for neither.
package struct JoinCode: Hashable, Sendable, CustomStringConvertible {
    package let digits: String

    package init(_ peer: PeerIdentity) {
        var w = ByteWriter(capacity: 85)
        w.raw("keyferry.sync.code.v1".utf8)
        w.raw(peer.signing.bytes)
        w.raw(peer.sealing.bytes)
        let value = ContentDigest.of(w.bytes).prefix(8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let text = String(value % 1_000_000)
        digits = String(repeating: "0", count: 6 - text.count) + text
    }

    /// A code as a person types it: six digits, spaces and dashes allowed between.
    package init?(typed: String) {
        let digits = typed.filter { $0 != " " && $0 != "-" }
        guard digits.count == 6, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        self.digits = digits
    }

    /// `123 456`.
    package var description: String { "\(digits.prefix(3)) \(digits.suffix(3))" }
}

/// A member's admission of a device: everything the device checks before anything changes
/// anywhere, signed by the member. The member signs the device's membership entry but does not
/// publish it; the device publishes it once it has verified the circle and opened the keys, so
/// a join that fails leaves the circle as it was. It travels on the circle's `joins` stream (an
/// approved request) or as a file (`circle vouch --out`).
package struct Voucher: Hashable, Sendable {
    package var circle: UUID
    package var relay: URL
    /// BLAKE2b-256 of the last membership entry the sponsor saw: the joiner accepts only a
    /// history from the relay that holds it, so a relay cannot pass off a circle of its own.
    package var head: [UInt8]
    /// The digest of the request it answers; 32 zero bytes for a voucher handed over as a file.
    package var request: [UInt8]
    /// The sponsor's signed entry admitting the joiner; nil when the joiner is a member
    /// already (an earlier join reached the relay, and the device did not finish).
    package var entry: MembershipEntry?
    /// The circle key of every generation the sponsor holds, the current one last, each sealed
    /// to the joiner and signed by the sponsor: a joiner opens the versions last written under
    /// an earlier generation too (a removal starts a new one, and items untouched since stay
    /// sealed under the old).
    package var shares: [CircleKeyShare]
    package var sponsor: SigningPublicKey
    var signature: [UInt8]

    static let magic = Array("KFVO".utf8)
    static let format: UInt8 = 1
    package static let noRequest = [UInt8](repeating: 0, count: 32)
    /// Generations a voucher carries at most: it fits in a join record (4 KiB).
    package static let maximumShares: UInt32 = 16

    package init(
        circle: UUID, relay: URL, head: [UInt8], request: [UInt8]?, entry: MembershipEntry?, shares: [CircleKeyShare], sponsor: SigningKey
    ) {
        self.circle = circle
        self.relay = relay
        self.head = head
        self.request = request ?? Self.noRequest
        self.entry = entry
        self.shares = shares.sorted { $0.epoch < $1.epoch }
        self.sponsor = sponsor.publicKey
        signature = []
        signature = sponsor.signature(for: signedBytes)
    }

    /// The current generation's share: the last.
    package var share: CircleKeyShare { shares.last! }

    /// Whether the sponsor signed all of it: the voucher, the entry and every share, one per
    /// generation, all to one recipient.
    package var isSignedBySponsor: Bool {
        sponsor.isValidSignature(signature, for: signedBytes)
            && shares.allSatisfy { $0.sender == sponsor && $0.circle == circle && $0.recipient == share.recipient }
            && zip(shares, shares.dropFirst()).allSatisfy { $0.epoch < $1.epoch }
            && (entry.map { $0.signer == sponsor && $0.circle == circle } ?? true)
    }

    package var bytes: [UInt8] { signedBytes + signature }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("not a voucher") }
            let format = try r.uint8()
            guard format == Self.format else { throw EnvelopeError.unsupportedFormat(format) }
            circle = try r.uuid()
            let relayText = try r.string()
            // Only a URL that reads back as written: the signature covers the text.
            guard let relay = URL(string: relayText), ["http", "https"].contains(relay.scheme), relay.absoluteString == relayText else {
                throw EnvelopeError.malformed("a voucher names no relay URL")
            }
            self.relay = relay
            head = Array(try r.raw(32))
            request = Array(try r.raw(32))
            let entryBytes = Array(try r.lengthPrefixed())
            entry = entryBytes.isEmpty ? nil : try MembershipEntry(bytes: entryBytes)
            let count = try r.uint32()
            guard (1...Self.maximumShares).contains(count) else { throw EnvelopeError.malformed("a voucher holds 1 to \(Self.maximumShares) shares") }
            shares = try (0..<count).map { _ in try CircleKeyShare(bytes: Array(try r.lengthPrefixed())) }
            sponsor = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a voucher") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a voucher is truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("a voucher names a key of the wrong length")
        } catch let error as CircleError {
            throw EnvelopeError.malformed("a voucher's membership entry: \(error.message)")
        }
    }

    /// `"KFVO" | format u8 (1) | circle uuid (16) | relay string | head (32) | request (32)
    /// | bytes(entry, empty for none) | count u32 | bytes(share)* | sponsor signing key (32)`.
    private var signedBytes: [UInt8] {
        var w = ByteWriter(capacity: 600)
        w.raw(Self.magic)
        w.uint8(Self.format)
        w.uuid(circle)
        w.string(relay.absoluteString)
        w.raw(head)
        w.raw(request)
        w.lengthPrefixed(entry?.bytes ?? [])
        w.uint32(UInt32(shares.count))
        for share in shares { w.lengthPrefixed(share.bytes) }
        w.raw(sponsor.bytes)
        return w.bytes
    }
}

/// A member's refusal of a join request, so the waiting device stops at once.
package struct JoinDecline: Hashable, Sendable {
    package var circle: UUID
    package var request: [UInt8]
    package var signer: SigningPublicKey
    var signature: [UInt8]

    static let magic = Array("KFJD".utf8)
    static let format: UInt8 = 1

    package init(circle: UUID, request: [UInt8], signer: SigningKey) {
        self.circle = circle
        self.request = request
        self.signer = signer.publicKey
        signature = []
        signature = signer.signature(for: signedBytes)
    }

    package var isSigned: Bool { signer.isValidSignature(signature, for: signedBytes) }

    package var bytes: [UInt8] { signedBytes + signature }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("not a decline") }
            let format = try r.uint8()
            guard format == Self.format else { throw EnvelopeError.unsupportedFormat(format) }
            circle = try r.uuid()
            request = Array(try r.raw(32))
            signer = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a decline") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a decline is truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("a decline names a key of the wrong length")
        }
    }

    /// `"KFJD" | format u8 (1) | circle uuid (16) | request (32) | signer signing key (32)`.
    private var signedBytes: [UInt8] {
        var w = ByteWriter(capacity: 85)
        w.raw(Self.magic)
        w.uint8(Self.format)
        w.uuid(circle)
        w.raw(request)
        w.raw(signer.bytes)
        return w.bytes
    }
}

/// A record of a circle's `joins` stream, told apart by its first four bytes.
package enum JoinRecord: Hashable, Sendable {
    case request(JoinRequest)
    case voucher(Voucher)
    case decline(JoinDecline)

    package init(bytes: [UInt8]) throws {
        switch Array(bytes.prefix(4)) {
        case JoinRequest.magic: self = .request(try JoinRequest(bytes: bytes))
        case Voucher.magic: self = .voucher(try Voucher(bytes: bytes))
        case JoinDecline.magic: self = .decline(try JoinDecline(bytes: bytes))
        default: throw EnvelopeError.malformed("not a join request, voucher or decline")
        }
    }

    package var bytes: [UInt8] {
        switch self {
        case .request(let request): request.bytes
        case .voucher(let voucher): voucher.bytes
        case .decline(let decline): decline.bytes
        }
    }

    package var circle: UUID {
        switch self {
        case .request(let request): request.circle
        case .voucher(let voucher): voucher.circle
        case .decline(let decline): decline.circle
        }
    }
}
