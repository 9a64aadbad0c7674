package import Foundation
package import KeychainModel
package import KeyferryCrypto

/// A device's identity in a circle: the public halves of its keys, and a name for people.
package struct PeerIdentity: Hashable, Sendable {
    package var name: String
    package var signing: SigningPublicKey
    package var sealing: SealingPublicKey

    package init(name: String, signing: SigningPublicKey, sealing: SealingPublicKey) {
        self.name = name
        self.signing = signing
        self.sealing = sealing
    }

    /// The longest name a member may have, in UTF-8 bytes: every member and the relay keep
    /// every name, so a name is no place for megabytes.
    package static let maximumNameBytes = 64

    /// A name others can read: not empty, at most `maximumNameBytes`.
    package static func check(name: String) throws {
        guard !name.isEmpty else { throw CircleError(.invalidName, "a member needs a name the others can read") }
        guard name.utf8.count <= maximumNameBytes else {
            throw CircleError(.invalidName, "a member's name is at most \(maximumNameBytes) bytes; this one is \(name.utf8.count)")
        }
    }
}

/// The private side of a device identity, made from two 32-byte seeds that the device keeps
/// as device-bound keychain items.
package struct DeviceIdentity: Sendable {
    package let signingKey: SigningKey
    package let sealingKey: SealingKey

    package init(signingSeed: SymmetricKey, sealingSeed: SymmetricKey) {
        signingKey = SigningKey(seed: signingSeed)
        sealingKey = SealingKey(seed: sealingSeed)
    }

    package func peer(named name: String) -> PeerIdentity {
        PeerIdentity(name: name, signing: signingKey.publicKey, sealing: sealingKey.publicKey)
    }
}

/// One signed step of a circle's membership. See Protocol/sync.md, "Membership".
package struct MembershipEntry: Hashable, Sendable {
    package enum Kind: UInt8, Sendable {
        /// The first entry: the creator vouches for itself.
        case create = 1
        /// A member (the sponsor) vouches for a new device.
        case join = 2
        /// A member removes a peer; a new key generation follows.
        case remove = 3
    }

    package var circle: UUID
    package var sequence: UInt32
    /// BLAKE2b-256 of the previous entry's bytes; for the first, 32 random bytes from which,
    /// with the creator's key, the circle's id is made.
    package var previous: [UInt8]
    package var kind: Kind
    package var subject: PeerIdentity
    package var signer: SigningPublicKey
    var signature: [UInt8]

    /// 2 since circles are named after their creator (format 1 took any id).
    static let formatVersion: UInt8 = 2

    /// The next entry after `history`, signed by `signer`.
    package init(_ kind: Kind, subject: PeerIdentity, after history: CircleHistory, signer: SigningKey) {
        self.init(
            kind, circle: history.circle, sequence: UInt32(history.entries.count),
            previous: ContentDigest.of(history.entries.last!.bytes), subject: subject, signer: signer)
    }

    /// The first entry of a new circle: `creator` vouches for itself, and the circle's id
    /// comes from its key and fresh random bytes (`CircleHistory.circleID`).
    package static func creating(_ creator: DeviceIdentity, name: String, entropy: any EntropySource = SystemEntropy()) -> MembershipEntry {
        let nonce = entropy.bytes(32)
        return MembershipEntry(
            .create, circle: CircleHistory.circleID(creator: creator.signingKey.publicKey, nonce: nonce), sequence: 0,
            previous: nonce, subject: creator.peer(named: name), signer: creator.signingKey)
    }

    /// Any entry, however wrong: what tests of refusals need.
    init(_ kind: Kind, circle: UUID, sequence: UInt32, previous: [UInt8], subject: PeerIdentity, signer: SigningKey) {
        self.circle = circle
        self.sequence = sequence
        self.previous = previous
        self.kind = kind
        self.subject = subject
        self.signer = signer.publicKey
        signature = []
        signature = signer.signature(for: signedBytes)
    }

    package var bytes: [UInt8] { signedBytes + signature }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            let format = try r.uint8()
            guard format >= Self.formatVersion else {
                throw CircleError(
                    .invalidHistory,
                    "membership entry format \(format) is from a circle made by an older Keyferry, before circles were "
                        + "named after their creator; leave it (by force: its history no longer verifies) and create a new one")
            }
            guard format == Self.formatVersion else { throw CircleError(.invalidHistory, "membership entry format \(format) is newer than this build reads") }
            circle = try r.uuid()
            sequence = try r.uint32()
            previous = Array(try r.raw(32))
            guard let kind = Kind(rawValue: try r.uint8()) else { throw CircleError(.invalidHistory, "unknown membership entry kind") }
            self.kind = kind
            subject = PeerIdentity(
                name: try r.string(), signing: try SigningPublicKey(bytes: Array(try r.raw(32))),
                sealing: try SealingPublicKey(bytes: Array(try r.raw(32))))
            signer = try SigningPublicKey(bytes: Array(try r.raw(32)))
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw ByteReader.Malformed() }
            guard subject.name.utf8.count <= PeerIdentity.maximumNameBytes else {
                throw CircleError(.invalidHistory, "a membership entry names a member in more than \(PeerIdentity.maximumNameBytes) bytes")
            }
        } catch is ByteReader.Malformed {
            throw CircleError(.invalidHistory, "a membership entry is truncated or malformed")
        } catch is CryptoError {
            throw CircleError(.invalidHistory, "a membership entry holds a key of the wrong length")
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
    package var isSignedBySigner: Bool { signer.isValidSignature(signature, for: signedBytes) }
}

/// A circle's membership as a signed, hash-chained history that every node verifies whole:
/// the creator vouches for itself, each join is vouched for by a member, each removal is made
/// by a member. Nobody, the relay included, can add a member without a member's key, or
/// drop or reorder an entry unnoticed.
package struct CircleHistory: Hashable, Sendable {
    package let circle: UUID
    package private(set) var entries: [MembershipEntry]
    /// The members after the last entry, by signing key.
    package private(set) var members: [SigningPublicKey: PeerIdentity]
    /// The current key generation: 1, plus one per removal.
    package private(set) var epoch: UInt32
    /// Who makes each generation: the creator the first, the remover each next. Only its
    /// author's shares of a generation are taken, so no other member can plant one.
    package private(set) var generationAuthors: [UInt32: SigningPublicKey] = [:]

    /// A new circle with `creator` as its only member.
    package init(creator: DeviceIdentity, name: String, entropy: any EntropySource = SystemEntropy()) {
        try! self.init(verifying: [MembershipEntry.creating(creator, name: name, entropy: entropy)])
    }

    /// A circle's id: the first 16 bytes of BLAKE2b-256 of its creator's signing key and the
    /// random bytes of its first entry, as a UUID (version 8). Nobody without the creator's key
    /// can make a first entry for a circle that exists, so a forged history cannot take its id.
    package static func circleID(creator: SigningPublicKey, nonce: [UInt8]) -> UUID {
        var w = ByteWriter()
        w.raw("keyferry.sync.circle.v2".utf8)
        w.raw(creator.bytes)
        w.raw(nonce)
        var bytes = Array(ContentDigest.of(w.bytes).prefix(16))
        bytes[6] = bytes[6] & 0x0f | 0x80
        bytes[8] = bytes[8] & 0x3f | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// Checks every entry in order; throws at the first that breaks a rule.
    package init(verifying entries: [MembershipEntry]) throws {
        guard let first = entries.first else { throw CircleError(.invalidHistory, "a membership history has at least its creation") }
        circle = first.circle
        self.entries = []
        members = [:]
        epoch = 1
        for entry in entries { try append(entry) }
    }

    /// Reads a relay's log of records in its order, from the start: the first must create the
    /// circle `circle`; after it, see `extend(with:)`. Returns the history and what was passed
    /// over, with why.
    package static func reading(_ log: [[UInt8]], circle: UUID) throws -> (history: CircleHistory, refused: [Refusal]) {
        guard let first = log.first else { throw CircleError(.unknownCircle, "the relay knows no circle \(circle)") }
        var history = try CircleHistory(verifying: [MembershipEntry(bytes: first)])
        guard history.circle == circle else { throw CircleError(.invalidHistory, "the relay's history of circle \(circle) starts with another circle") }
        let refused = history.extend(with: log.dropFirst())
        return (history, refused)
    }

    /// Takes a relay's records in its order, after what this history already holds. An entry
    /// whose place is taken is passed over: read before, or written by another member for the
    /// same place at the same moment and held second by the relay. Anything else that does not
    /// extend the history (what a stranger or a broken relay put there) is passed over too, and
    /// why is returned. Every member reading the same log passes over the same records, so one
    /// bad record cannot stop a circle.
    package mutating func extend(with log: some Sequence<[UInt8]>) -> [Refusal] {
        var refused: [Refusal] = []
        for bytes in log {
            do {
                let entry = try MembershipEntry(bytes: bytes)
                // Its place is taken: read before, or lost a race for it.
                guard Int(entry.sequence) >= entries.count else { continue }
                try append(entry)
            } catch {
                refused.append(Refusal(.invalidHistory, "\(error)"))
            }
        }
        return refused
    }

    /// Adds one entry after checking it against the history so far.
    package mutating func append(_ entry: MembershipEntry) throws {
        let position = entries.count
        func refuse(_ why: String) -> CircleError {
            CircleError(.invalidHistory, "membership entry \(position) (\(entry.kind), \(entry.subject.name)): \(why)")
        }
        guard entry.circle == circle else { throw refuse("it belongs to another circle") }
        guard entry.sequence == UInt32(position) else { throw refuse("it is out of place (sequence \(entry.sequence))") }
        if let last = entries.last, entry.previous != ContentDigest.of(last.bytes) { throw refuse("it does not follow the entry before it") }
        guard entry.isSignedBySigner else { throw refuse("its signature does not verify") }
        switch entry.kind {
        case .create:
            guard position == 0, entry.signer == entry.subject.signing else { throw refuse("only the first entry creates, signed by its subject") }
            guard entry.circle == Self.circleID(creator: entry.signer, nonce: entry.previous) else {
                throw refuse("the circle's id is not the one its creator's key and first entry make")
            }
        case .join:
            guard members[entry.signer] != nil else { throw refuse("its sponsor is not a member") }
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
    package func isMember(_ signing: SigningPublicKey) -> Bool { members[signing] != nil }
}
