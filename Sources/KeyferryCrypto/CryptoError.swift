/// Why a cryptographic operation failed. Deliberately vague about *which* check failed:
/// an authentication failure says nothing about the key or the data.
package enum CryptoError: Error, Equatable, Sendable {
    /// The ciphertext, its associated data or the key do not match (forged, edited or wrong key).
    case authenticationFailed
    /// A key, nonce or salt had the wrong length for the algorithm.
    case invalidLength(expected: Int, actual: Int)
    /// Argon2id could not allocate its memory or was given parameters outside libsodium's range.
    case passwordHashingFailed
}
