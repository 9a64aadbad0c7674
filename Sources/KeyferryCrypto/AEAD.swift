internal import CSodium
package import Foundation

/// XChaCha20-Poly1305 (IETF). The 24-byte nonce is random per message, so it is safe to draw
/// it from the entropy source without a counter. A sealed box is `nonce || ciphertext || tag`.
///
/// The generic entry points are inlinable so each caller gets a specialized copy; the work
/// happens in the raw-buffer functions below, the only ones that touch libsodium.
package enum AEAD {
    package static let nonceByteCount = 24
    package static let tagByteCount = 16
    /// Bytes a sealed box adds to its plaintext.
    package static let overhead = nonceByteCount + tagByteCount

    @inlinable
    package static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, associatedData: some ContiguousBytes,
        entropy: any EntropySource = SystemEntropy()
    ) -> Data {
        seal(plaintext, key: key, nonce: entropy.bytes(nonceByteCount), associatedData: associatedData)
    }

    /// Sealing with a caller-chosen nonce, for test vectors. Never reuse a nonce under one key.
    @inlinable
    package static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, nonce: [UInt8], associatedData: some ContiguousBytes
    ) -> Data {
        plaintext.withUnsafeBytes { message in
            associatedData.withUnsafeBytes { ad in
                nonce.withUnsafeBytes { sealRaw(message, key: key, nonce: $0, associatedData: ad) }
            }
        }
    }

    /// Opens a sealed box; any edit to the box, the associated data or a wrong key throws
    /// `CryptoError.authenticationFailed`.
    @inlinable
    package static func open(
        _ box: some ContiguousBytes, key: SymmetricKey, associatedData: some ContiguousBytes
    ) throws -> Data {
        try box.withUnsafeBytes { sealed in
            try associatedData.withUnsafeBytes { try openRaw(sealed, key: key, associatedData: $0) }
        }
    }

    /// `open`, into an array: for plaintext that is decoded as bytes at once (a row's metadata),
    /// where a `Data` would be one more allocation and copy per row.
    @inlinable
    package static func openBytes(
        _ box: some ContiguousBytes, key: SymmetricKey, associatedData: some ContiguousBytes
    ) throws -> [UInt8] {
        try box.withUnsafeBytes { sealed in
            guard sealed.count >= overhead else { throw CryptoError.authenticationFailed }
            var opened = false
            let plain = associatedData.withUnsafeBytes { ad in
                [UInt8](unsafeUninitializedCapacity: sealed.count - overhead) { buffer, count in
                    opened = openRaw(sealed, key: key, associatedData: ad, into: UnsafeMutableRawBufferPointer(buffer))
                    count = buffer.count
                }
            }
            guard opened else { throw CryptoError.authenticationFailed }
            return plain
        }
    }

    @usableFromInline
    static func sealRaw(_ message: UnsafeRawBufferPointer, key: SymmetricKey, nonce: UnsafeRawBufferPointer, associatedData ad: UnsafeRawBufferPointer) -> Data
    {
        _ = Sodium.ready
        precondition(nonce.count == nonceByteCount, "XChaCha20-Poly1305 nonces are 24 bytes")
        var out = Data(count: nonceByteCount + message.count + tagByteCount)
        out.withUnsafeMutableBytes { buffer in
            let base = buffer.sodiumBase
            base.update(from: nonce.sodiumBase, count: nonceByteCount)
            var written: UInt64 = 0
            key.withUnsafeBytes { k in
                Sodium.check(
                    crypto_aead_xchacha20poly1305_ietf_encrypt(
                        base + nonceByteCount, &written, message.sodiumBase, UInt64(message.count),
                        ad.sodiumBase, UInt64(ad.count), nil, base, k.sodiumBase), "crypto_aead_xchacha20poly1305_ietf_encrypt")
            }
        }
        return out
    }

    @usableFromInline
    static func openRaw(_ sealed: UnsafeRawBufferPointer, key: SymmetricKey, associatedData ad: UnsafeRawBufferPointer) throws -> Data {
        guard sealed.count >= overhead else { throw CryptoError.authenticationFailed }
        var out = Data(count: sealed.count - overhead)
        guard out.withUnsafeMutableBytes({ openRaw(sealed, key: key, associatedData: ad, into: $0) }) else { throw CryptoError.authenticationFailed }
        return out
    }

    /// Opens `sealed` (at least `overhead` bytes) into `out` (`overhead` fewer); false when it
    /// does not authenticate.
    @usableFromInline
    static func openRaw(
        _ sealed: UnsafeRawBufferPointer, key: SymmetricKey, associatedData ad: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer
    ) -> Bool {
        _ = Sodium.ready
        precondition(sealed.count >= overhead && out.count == sealed.count - overhead, "an opened box is its sealed form less the overhead")
        let base = sealed.sodiumBase
        var written: UInt64 = 0
        let status = key.withUnsafeBytes { k in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                out.sodiumBase, &written, nil, base + nonceByteCount, UInt64(sealed.count - nonceByteCount),
                ad.sodiumBase, UInt64(ad.count), base, k.sodiumBase)
        }
        return status == 0
    }
}

// Keys sealed under other keys: the key's bytes go straight from one zeroed buffer into the
// cipher and back, never through an ordinary array.
extension AEAD {
    /// Seals `key` under `wrappingKey` with a fresh nonce.
    package static func wrap(
        _ key: SymmetricKey, under wrappingKey: SymmetricKey, associatedData: some ContiguousBytes,
        entropy: any EntropySource = SystemEntropy()
    ) -> Data {
        wrap(key, under: wrappingKey, nonce: entropy.bytes(nonceByteCount), associatedData: associatedData)
    }

    /// Seals `key` with a caller-chosen nonce, for rows sealed from one draw of randomness.
    package static func wrap(_ key: SymmetricKey, under wrappingKey: SymmetricKey, nonce: [UInt8], associatedData: some ContiguousBytes) -> Data {
        key.withUnsafeBytes { bytes in
            associatedData.withUnsafeBytes { ad in
                nonce.withUnsafeBytes { sealRaw(bytes, key: wrappingKey, nonce: $0, associatedData: ad) }
            }
        }
    }

    /// Opens a key sealed by `wrap`; fails like `open` on any tampering or the wrong key.
    package static func unwrap(_ box: some ContiguousBytes, under wrappingKey: SymmetricKey, associatedData: some ContiguousBytes) throws -> SymmetricKey {
        _ = Sodium.ready
        return try box.withUnsafeBytes { sealed in
            guard sealed.count == overhead + SymmetricKey.byteCount else { throw CryptoError.authenticationFailed }
            let out = SecureBytes(count: SymmetricKey.byteCount)
            let status = associatedData.withUnsafeBytes { ad in
                wrappingKey.withUnsafeBytes { k in
                    crypto_aead_xchacha20poly1305_ietf_decrypt(
                        out.buffer.sodiumBase, nil, nil, sealed.sodiumBase + nonceByteCount, UInt64(sealed.count - nonceByteCount),
                        ad.sodiumBase, UInt64(ad.count), sealed.sodiumBase, k.sodiumBase)
                }
            }
            guard status == 0 else { throw CryptoError.authenticationFailed }
            return SymmetricKey(storage: out)
        }
    }
}
