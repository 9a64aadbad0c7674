package import Foundation
import KeychainModel
package import KeyferryCrypto

/// One generation of a circle's keys: the circle key, and the class keys A and C it wraps.
/// Removing a peer starts a new generation (epoch), so the removed peer cannot read anything
/// written after its removal.
package struct CircleKeys: Sendable {
    package let circle: UUID
    package let epoch: UInt32
    package let circleKey: SymmetricKey
    private let classKeys: [SyncClass: SymmetricKey]

    /// A fresh generation.
    package init(circle: UUID, epoch: UInt32, entropy: any EntropySource = SystemEntropy()) {
        self.circle = circle
        self.epoch = epoch
        circleKey = SymmetricKey(randomFrom: entropy)
        classKeys = Dictionary(uniqueKeysWithValues: SyncClass.allCases.map { ($0, SymmetricKey(randomFrom: entropy)) })
    }

    /// A generation opened from its circle key (from a share) and its published class keys.
    package init(circle: UUID, epoch: UInt32, circleKey: SymmetricKey, wrappedClassKeys: [UInt8]) throws {
        self.circle = circle
        self.epoch = epoch
        self.circleKey = circleKey
        let size = SymmetricKey.byteCount + AEAD.overhead
        guard wrappedClassKeys.count == size * SyncClass.allCases.count else { throw EnvelopeError.malformed("class keys") }
        var keys: [SyncClass: SymmetricKey] = [:]
        for (index, syncClass) in SyncClass.allCases.enumerated() {
            let box = wrappedClassKeys[(index * size)..<((index + 1) * size)]
            guard let key = try? AEAD.unwrap(box, under: circleKey, associatedData: Self.classKeyAD(circle, epoch, syncClass)) else {
                throw EnvelopeError.cannotDecrypt("the class keys of generation \(epoch) do not open under this circle key")
            }
            keys[syncClass] = key
        }
        classKeys = keys
    }

    package func classKey(_ syncClass: SyncClass) -> SymmetricKey { classKeys[syncClass]! }

    /// The class keys sealed under the circle key, in `SyncClass.allCases` order: what a
    /// generation publishes beside its shares.
    package func wrappedClassKeys(entropy: any EntropySource = SystemEntropy()) -> [UInt8] {
        SyncClass.allCases.flatMap { syncClass in
            AEAD.wrap(classKey(syncClass), under: circleKey, associatedData: Self.classKeyAD(circle, epoch, syncClass), entropy: entropy)
        }
    }

    private static func classKeyAD(_ circle: UUID, _ epoch: UInt32, _ syncClass: SyncClass) -> [UInt8] {
        var w = ByteWriter()
        w.raw("keyferry.sync.classkey.v1".utf8)
        w.uuid(circle)
        w.uint32(epoch)
        w.uint8(syncClass.rawValue)
        return w.bytes
    }
}

/// A generation's class keys, sealed under its circle key and signed by the member who made
/// the generation: only that member can publish them, and a second, different set for a
/// generation is refused rather than read.
package struct PublishedClassKeys: Hashable, Sendable {
    package var circle: UUID
    package var epoch: UInt32
    /// `wrapped A (72) | wrapped C (72)`: `CircleKeys.wrappedClassKeys`.
    package var wrapped: [UInt8]
    package var signer: SigningPublicKey
    var signature: [UInt8]

    static let label = Array("keyferry.sync.classkeys.v2".utf8)

    package init(_ keys: CircleKeys, wrapped: [UInt8], signer: SigningKey) {
        circle = keys.circle
        epoch = keys.epoch
        self.wrapped = wrapped
        self.signer = signer.publicKey
        signature = []
        signature = signer.signature(for: signedBytes)
    }

    /// Whether `author` signed them, for this circle.
    package func isSigned(by author: SigningPublicKey, circle: UUID) -> Bool {
        signer == author && self.circle == circle && signer.isValidSignature(signature, for: signedBytes)
    }

    /// `signed bytes | signature`.
    package var bytes: [UInt8] { signedBytes + signature }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            guard Array(try r.raw(Self.label.count)) == Self.label else { throw EnvelopeError.malformed("not a generation's class keys") }
            circle = try r.uuid()
            epoch = try r.uint32()
            wrapped = Array(try r.lengthPrefixed())
            signer = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw ByteReader.Malformed() }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a generation's class keys are truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("a generation's class keys name a key of the wrong length")
        }
    }

    private var signedBytes: [UInt8] {
        var w = ByteWriter()
        w.raw(Self.label)
        w.uuid(circle)
        w.uint32(epoch)
        w.lengthPrefixed(wrapped)
        w.raw(signer.bytes)
        return w.bytes
    }
}

/// A generation's circle key sealed to one member and signed by the member who made it:
/// the relay can neither read it nor pass off a key of its own.
package struct CircleKeyShare: Hashable, Sendable {
    package var circle: UUID
    package var epoch: UInt32
    package var recipient: SealingPublicKey
    package var sender: SigningPublicKey
    var sealedKey: [UInt8]
    var signature: [UInt8]

    package init(_ keys: CircleKeys, to recipient: SealingPublicKey, from sender: SigningKey) {
        circle = keys.circle
        epoch = keys.epoch
        self.recipient = recipient
        self.sender = sender.publicKey
        sealedKey = recipient.wrap(keys.circleKey)
        signature = []
        signature = sender.signature(for: signedBytes)
    }

    /// The circle key, once the signature checks out against a sender the caller trusts.
    package func open(with recipientKey: SealingKey, trusting senders: Set<SigningPublicKey>) throws -> SymmetricKey {
        guard senders.contains(sender) else { throw EnvelopeError.notAMember("the share of generation \(epoch) comes from a device outside the circle") }
        guard sender.isValidSignature(signature, for: signedBytes) else { throw EnvelopeError.forged("the share of generation \(epoch) has a bad signature") }
        guard recipientKey.publicKey == recipient, let key = try? recipientKey.unwrap(sealedKey) else {
            throw EnvelopeError.cannotDecrypt("the share of generation \(epoch) is not for this device")
        }
        return key
    }

    /// Whether `author` signed it, for this circle: what a relay can check without the key.
    package func isSigned(by author: SigningPublicKey, circle: UUID) -> Bool {
        sender == author && self.circle == circle && sender.isValidSignature(signature, for: signedBytes)
    }

    /// `signed bytes | signature`.
    package var bytes: [UInt8] { signedBytes + signature }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            guard Array(try r.raw(22)) == Array("keyferry.sync.share.v1".utf8) else { throw EnvelopeError.malformed("not a key share") }
            circle = try r.uuid()
            epoch = try r.uint32()
            recipient = try SealingPublicKey(bytes: Array(try r.raw(SealingPublicKey.byteCount)))
            sender = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            sealedKey = Array(try r.lengthPrefixed())
            signature = Array(try r.raw(SigningKey.signatureByteCount))
            guard r.isAtEnd else { throw ByteReader.Malformed() }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a key share is truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("a key share holds a key of the wrong length")
        }
    }

    private var signedBytes: [UInt8] {
        var w = ByteWriter()
        w.raw("keyferry.sync.share.v1".utf8)
        w.uuid(circle)
        w.uint32(epoch)
        w.raw(recipient.bytes)
        w.raw(sender.bytes)
        w.lengthPrefixed(sealedKey)
        return w.bytes
    }
}
