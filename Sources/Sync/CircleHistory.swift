import Foundation
import KeychainModel
import KeyferryCrypto

/// A device's identity in a circle: the public halves of its keys, and a name for people.
public struct PeerIdentity: Hashable, Sendable {
    public var name: String
    public var signing: SigningPublicKey
    public var sealing: SealingPublicKey

    public init(name: String, signing: SigningPublicKey, sealing: SealingPublicKey) {
        self.name = name
        self.signing = signing
        self.sealing = sealing
    }
}

/// The private side of a device identity, made from two 32-byte seeds that the device keeps
/// as device-bound keychain items.
public struct DeviceIdentity: Sendable {
    public let signingKey: SigningKey
    public let sealingKey: SealingKey

    public init(signingSeed: SymmetricKey, sealingSeed: SymmetricKey) {
        signingKey = SigningKey(seed: signingSeed)
        sealingKey = SealingKey(seed: sealingSeed)
    }

    public func peer(named name: String) -> PeerIdentity {
        PeerIdentity(name: name, signing: signingKey.publicKey, sealing: sealingKey.publicKey)
    }
}

/// One signed step of a circle's membership. See Protocol/sync.md, "Membership".
public struct MembershipEntry: Hashable, Sendable {
    public enum Kind: UInt8, Sendable {
        /// The first entry: the creator vouches for itself.
        case create = 1
        /// A member (the sponsor) vouches for a new device.
        case join = 2
        /// A member removes a peer; a new key generation follows.
        case remove = 3
    }

    public var circle: UUID
    public var sequence: UInt32
    /// BLAKE2b-256 of the previous entry's bytes; 32 zero bytes for the first.
    public var previous: [UInt8]
    public var kind: Kind
    public var subject: PeerIdentity
    public var signer: SigningPublicKey
    var signature: [UInt8]

    static let formatVersion: UInt8 = 1

    /// The next entry after `history` (or the first, for `.create`), signed by `signer`.
    public init(_ kind: Kind, subject: PeerIdentity, after history: CircleHistory?, circle: UUID, signer: SigningKey) {
        self.circle = history?.circle ?? circle
        sequence = UInt32(history?.entries.count ?? 0)
        previous = history?.entries.last.map { ContentDigest.of($0.bytes) } ?? [UInt8](repeating: 0, count: 32)
        self.kind = kind
        self.subject = subject
        self.signer = signer.publicKey
        signature = []
        signature = signer.signature(for: signedBytes)
    }

    public var bytes: [UInt8] { signedBytes + signature }

    public init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            let format = try r.uint8()
            guard format == Self.formatVersion else { throw CircleError.invalid("membership entry format \(format) is newer than this build reads") }
            circle = try r.uuid()
            sequence = try r.uint32()
            previous = Array(try r.raw(32))
            guard let kind = Kind(rawValue: try r.uint8()) else { throw CircleError.invalid("unknown membership entry kind") }
            self.kind = kind
            subject = PeerIdentity(name: try r.string(), signing: try SigningPublicKey(bytes: Array(try r.raw(32))),
                                   sealing: try SealingPublicKey(bytes: Array(try r.raw(32))))
            signer = try SigningPublicKey(bytes: Array(try r.raw(32)))
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw ByteReader.Malformed() }
        } catch is ByteReader.Malformed {
            throw CircleError.invalid("a membership entry is truncated or malformed")
        } catch is CryptoError {
            throw CircleError.invalid("a membership entry holds a key of the wrong length")
        }
    }

    private var signedBytes: [UInt8] {
        var w = ByteWriter()
        w.uint8(Self.formatVersion)
        w.uuid(circle)
        w.uint32(sequence)
        w.raw(previous)
        w.uint8(kind.rawValue)
        w.string(subject.name)
        w.raw(subject.signing.bytes)
        w.raw(subject.sealing.bytes)
        w.raw(signer.bytes)
        return w.bytes
    }

    /// Whether the signature holds: all a relay can check, knowing no keys.
    public var isSignedBySigner: Bool { signer.isValidSignature(signature, for: signedBytes) }
}

/// Why a membership history was refused.
public enum CircleError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalid(String)

    public var description: String {
        switch self { case .invalid(let why): why }
    }
}

/// A circle's membership as a signed, hash-chained history that every node verifies whole:
/// the creator vouches for itself, each join is vouched for by a member, each removal is made
/// by a member. Nobody, the relay included, can add a member without a member's key, or
/// drop or reorder an entry unnoticed.
public struct CircleHistory: Hashable, Sendable {
    public let circle: UUID
    public private(set) var entries: [MembershipEntry]
    /// The members after the last entry, by signing key.
    public private(set) var members: [SigningPublicKey: PeerIdentity]
    /// The current key generation: 1, plus one per removal.
    public private(set) var epoch: UInt32
    /// Who makes each generation: the creator the first, the remover each next. Only its
    /// author's shares of a generation are taken, so no other member can plant one.
    public private(set) var generationAuthors: [UInt32: SigningPublicKey] = [:]

    /// A new circle with `creator` as its only member.
    public init(creating circle: UUID = UUID(), creator: DeviceIdentity, name: String) {
        let first = MembershipEntry(.create, subject: creator.peer(named: name), after: nil, circle: circle, signer: creator.signingKey)
        try! self.init(verifying: [first])
    }

    /// Checks every entry in order; throws at the first that breaks a rule.
    public init(verifying entries: [MembershipEntry]) throws {
        guard let first = entries.first else { throw CircleError.invalid("a membership history has at least its creation") }
        circle = first.circle
        self.entries = []
        members = [:]
        epoch = 1
        for entry in entries { try append(entry) }
    }

    /// Reads a relay's log of entries in its order, from the start or after what this history
    /// already holds. An entry whose place is taken is passed over: one read before, or one that
    /// another member wrote for the same place at the same moment and that the relay holds
    /// second (every member passes over the same one). Every other entry must extend the history.
    public static func reading(_ log: [MembershipEntry]) throws -> CircleHistory {
        guard let first = log.first else { throw CircleError.invalid("a membership history has at least its creation") }
        var history = try CircleHistory(verifying: [first])
        try history.extend(with: log.dropFirst())
        return history
    }

    /// See `reading(_:)`.
    public mutating func extend(with log: some Sequence<MembershipEntry>) throws {
        for entry in log where Int(entry.sequence) >= entries.count { try append(entry) }
    }

    /// Adds one entry after checking it against the history so far.
    public mutating func append(_ entry: MembershipEntry) throws {
        let position = entries.count
        func refuse(_ why: String) -> CircleError { .invalid("membership entry \(position) (\(entry.kind), \(entry.subject.name)): \(why)") }
        guard entry.circle == circle else { throw refuse("it belongs to another circle") }
        guard entry.sequence == UInt32(position) else { throw refuse("it is out of place (sequence \(entry.sequence))") }
        let expected = entries.last.map { ContentDigest.of($0.bytes) } ?? [UInt8](repeating: 0, count: 32)
        guard entry.previous == expected else { throw refuse("it does not follow the entry before it") }
        guard entry.isSignedBySigner else { throw refuse("its signature does not verify") }
        switch entry.kind {
        case .create:
            guard position == 0, entry.signer == entry.subject.signing else { throw refuse("only the first entry creates, signed by its subject") }
        case .join:
            guard position > 0, members[entry.signer] != nil else { throw refuse("its sponsor is not a member") }
            guard members[entry.subject.signing] == nil else { throw refuse("the device is already a member") }
        case .remove:
            guard members[entry.signer] != nil else { throw refuse("it was made by a device that is not a member") }
            guard members[entry.subject.signing] != nil else { throw refuse("the device is not a member") }
        }
        if entry.kind == .create { generationAuthors[epoch] = entry.signer }
        if entry.kind == .remove {
            members[entry.subject.signing] = nil
            epoch += 1
            generationAuthors[epoch] = entry.signer
        } else {
            members[entry.subject.signing] = entry.subject
        }
        entries.append(entry)
    }

    /// Whether the device with this signing key is a member now.
    public func isMember(_ signing: SigningPublicKey) -> Bool { members[signing] != nil }
}
