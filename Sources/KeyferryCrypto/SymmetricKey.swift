internal import CSodium
import Foundation

/// A 256-bit secret key, zeroed in memory when released. Equality is constant-time.
package struct SymmetricKey: Sendable, Equatable {
    package static let byteCount = 32
    let storage: SecureBytes

    /// A fresh key from the given entropy source.
    package init(randomFrom entropy: any EntropySource = SystemEntropy()) {
        var bytes = entropy.bytes(Self.byteCount)
        storage = SecureBytes(copying: bytes)
        Self.wipe(&bytes)
    }

    /// A key from existing bytes (an unwrapped class key, a test vector).
    package init<Bytes: Collection>(bytes: Bytes) throws where Bytes.Element == UInt8 {
        guard bytes.count == Self.byteCount else {
            throw CryptoError.invalidLength(expected: Self.byteCount, actual: bytes.count)
        }
        storage = SecureBytes(copying: bytes)
    }

    init(storage: SecureBytes) { self.storage = storage }

    /// Runs `body` with the raw key bytes. The bytes must not escape the closure.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage.buffer))
    }

    /// The key in an ordinary array, for published test vectors. To store a key, wrap it with
    /// `AEAD.wrap` instead, which never copies it out of zeroed memory.
    package var exportedBytes: [UInt8] { Array(UnsafeRawBufferPointer(storage.buffer)) }

    package static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool {
        lhs.storage.count == rhs.storage.count
            && sodium_memcmp(lhs.storage.buffer.baseAddress, rhs.storage.buffer.baseAddress, lhs.storage.count) == 0
    }

    /// Overwrites a plain byte array that held secret material.
    package static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
    }
}
