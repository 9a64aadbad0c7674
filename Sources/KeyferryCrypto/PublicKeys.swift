internal import CSodium
package import Foundation

/// An Ed25519 key pair: the half of a device's identity that vouches for what it writes.
/// Made from a 32-byte seed, which is all a device needs to keep.
package struct SigningKey: Sendable {
    package static let signatureByteCount = Int(crypto_sign_BYTES)
    /// libsodium's 64-byte secret key (seed and public key).
    private let secret: SecureBytes
    package let publicKey: SigningPublicKey

    package init(seed: SymmetricKey) {
        _ = Sodium.ready
        let secret = SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES))
        var publicBytes = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        seed.withUnsafeBytes { s in
            Sodium.check(crypto_sign_seed_keypair(&publicBytes, secret.buffer.sodiumBase, s.sodiumBase), "crypto_sign_seed_keypair")
        }
        self.secret = secret
        publicKey = SigningPublicKey(checkedBytes: publicBytes)
    }

    /// The detached signature of `message`; deterministic, as Ed25519 is.
    package func signature(for message: some ContiguousBytes) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Self.signatureByteCount)
        message.withUnsafeBytes { m in
            Sodium.check(crypto_sign_detached(&signature, nil, m.sodiumBase, UInt64(m.count), secret.buffer.sodiumBase), "crypto_sign_detached")
        }
        return signature
    }
}

/// The public half of a `SigningKey`: 32 bytes that anyone may hold.
package struct SigningPublicKey: Sendable, Hashable, Comparable {
    package static let byteCount = Int(crypto_sign_PUBLICKEYBYTES)
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else { throw CryptoError.invalidLength(expected: Self.byteCount, actual: bytes.count) }
        self.bytes = bytes
    }

    fileprivate init(checkedBytes: [UInt8]) { bytes = checkedBytes }

    package func isValidSignature(_ signature: some ContiguousBytes, for message: some ContiguousBytes) -> Bool {
        _ = Sodium.ready
        return signature.withUnsafeBytes { s in
            guard s.count == SigningKey.signatureByteCount else { return false }
            return message.withUnsafeBytes { m in
                crypto_sign_verify_detached(s.sodiumBase, m.sodiumBase, UInt64(m.count), bytes) == 0
            }
        }
    }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

/// An X25519 key pair for sealed boxes (libsodium's `crypto_box_seal`): anyone can seal a key
/// to the public half, only the holder of this half opens it, and the box says nothing about
/// who sealed it (a signature over the box does). Made from a 32-byte seed.
package struct SealingKey: Sendable {
    private let secret: SecureBytes
    package let publicKey: SealingPublicKey

    package init(seed: SymmetricKey) {
        _ = Sodium.ready
        let secret = SecureBytes(count: Int(crypto_box_SECRETKEYBYTES))
        var publicBytes = [UInt8](repeating: 0, count: Int(crypto_box_PUBLICKEYBYTES))
        seed.withUnsafeBytes { s in
            Sodium.check(crypto_box_seed_keypair(&publicBytes, secret.buffer.sodiumBase, s.sodiumBase), "crypto_box_seed_keypair")
        }
        self.secret = secret
        publicKey = SealingPublicKey(checkedBytes: publicBytes)
    }

    /// Opens a key sealed by `SealingPublicKey.wrap`; anything else, or a box for another key,
    /// fails with `CryptoError.authenticationFailed`.
    package func unwrap(_ box: some ContiguousBytes) throws -> SymmetricKey {
        try box.withUnsafeBytes { b in
            guard b.count == SealingPublicKey.wrappedKeyByteCount else { throw CryptoError.authenticationFailed }
            let out = SecureBytes(count: SymmetricKey.byteCount)
            let status = publicKey.bytes.withUnsafeBytes { pk in
                crypto_box_seal_open(out.buffer.sodiumBase, b.sodiumBase, UInt64(b.count), pk.sodiumBase, secret.buffer.sodiumBase)
            }
            guard status == 0 else { throw CryptoError.authenticationFailed }
            return SymmetricKey(storage: out)
        }
    }
}

/// The public half of a `SealingKey`.
package struct SealingPublicKey: Sendable, Hashable {
    package static let byteCount = Int(crypto_box_PUBLICKEYBYTES)
    /// A sealed key: an ephemeral public key, the key, and a tag.
    package static let wrappedKeyByteCount = SymmetricKey.byteCount + crypto_box_sealbytes()
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else { throw CryptoError.invalidLength(expected: Self.byteCount, actual: bytes.count) }
        self.bytes = bytes
    }

    fileprivate init(checkedBytes: [UInt8]) { bytes = checkedBytes }

    /// Seals `key` so that only this key's holder can open it. The ephemeral key pair comes
    /// from the system's CSPRNG inside libsodium, so the bytes differ on every call.
    package func wrap(_ key: SymmetricKey) -> [UInt8] {
        _ = Sodium.ready
        var box = [UInt8](repeating: 0, count: Self.wrappedKeyByteCount)
        key.withUnsafeBytes { k in
            Sodium.check(crypto_box_seal(&box, k.sodiumBase, UInt64(k.count), bytes), "crypto_box_seal")
        }
        return box
    }
}
