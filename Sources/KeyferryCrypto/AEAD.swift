internal import CSodium
import Foundation

/// XChaCha20-Poly1305 (IETF). The 24-byte nonce is random per message, so it is safe to draw
/// it from the entropy source without a counter. A sealed box is `nonce || ciphertext || tag`.
public enum AEAD {
    public static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    /// Bytes a sealed box adds to its plaintext.
    public static let overhead = nonceByteCount + tagByteCount

    public static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, associatedData: some ContiguousBytes,
        entropy: any EntropySource = SystemEntropy()
    ) -> Data {
        _ = Sodium.ready
        let nonce = entropy.bytes(nonceByteCount)
        return seal(plaintext, key: key, nonce: nonce, associatedData: associatedData)
    }

    /// Sealing with a caller-chosen nonce, for test vectors. Never reuse a nonce under one key.
    public static func seal(
        _ plaintext: some ContiguousBytes, key: SymmetricKey, nonce: [UInt8], associatedData: some ContiguousBytes
    ) -> Data {
        _ = Sodium.ready
        precondition(nonce.count == nonceByteCount, "XChaCha20-Poly1305 nonces are 24 bytes")
        return plaintext.withUnsafeBytes { message in
            associatedData.withUnsafeBytes { ad in
                key.withUnsafeBytes { k in
                    var out = Data(count: nonceByteCount + message.count + tagByteCount)
                    out.withUnsafeMutableBytes { buffer in
                        let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                        nonce.withUnsafeBytes { base.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: nonceByteCount) }
                        var written: UInt64 = 0
                        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                            base + nonceByteCount, &written,
                            message.sodiumBase, UInt64(message.count),
                            ad.sodiumBase, UInt64(ad.count),
                            nil, base, k.sodiumBase)
                    }
                    return out
                }
            }
        }
    }

    /// Opens a sealed box; any edit to the box, the associated data or a wrong key throws
    /// `CryptoError.authenticationFailed`.
    public static func open(
        _ box: some ContiguousBytes, key: SymmetricKey, associatedData: some ContiguousBytes
    ) throws -> Data {
        _ = Sodium.ready
        return try box.withUnsafeBytes { sealed in
            guard sealed.count >= overhead else { throw CryptoError.authenticationFailed }
            return try associatedData.withUnsafeBytes { ad in
                try key.withUnsafeBytes { k in
                    let base = sealed.bindMemory(to: UInt8.self).baseAddress!
                    var out = Data(count: sealed.count - overhead)
                    var written: UInt64 = 0
                    let status = out.withUnsafeMutableBytes { buffer in
                        crypto_aead_xchacha20poly1305_ietf_decrypt(
                            buffer.sodiumBase, &written, nil,
                            base + nonceByteCount, UInt64(sealed.count - nonceByteCount),
                            ad.sodiumBase, UInt64(ad.count),
                            base, k.sodiumBase)
                    }
                    guard status == 0 else { throw CryptoError.authenticationFailed }
                    return out
                }
            }
        }
    }
}
