internal import CSodium
package import Foundation

/// Keyed BLAKE2b: the keyed hashes behind primary-key lookups and key tangling.
package enum KeyedHash {
    @inlinable
    package static func digest(of message: some ContiguousBytes, key: SymmetricKey, length: Int = 32) -> [UInt8] {
        message.withUnsafeBytes { m in key.withUnsafeBytes { digestRaw(m, keyBytes: $0, length: length) } }
    }

    static func digest(of message: some ContiguousBytes, keyBytes: some ContiguousBytes, length: Int) -> [UInt8] {
        message.withUnsafeBytes { m in keyBytes.withUnsafeBytes { digestRaw(m, keyBytes: $0, length: length) } }
    }

    @usableFromInline
    static func digestRaw(_ message: UnsafeRawBufferPointer, keyBytes: UnsafeRawBufferPointer, length: Int) -> [UInt8] {
        _ = Sodium.ready
        precondition((16...64).contains(length), "BLAKE2b digests are 16 to 64 bytes")
        var out = [UInt8](repeating: 0, count: length)
        Sodium.check(crypto_generichash(&out, length, message.sodiumBase, UInt64(message.count), keyBytes.sodiumBase, keyBytes.count), "crypto_generichash")
        return out
    }
}

extension SymmetricKey {
    /// A subkey for one purpose (libsodium's `crypto_kdf`, BLAKE2b-based). `context` names the
    /// purpose in exactly eight ASCII characters; `id` separates subkeys within it.
    package func derive(context: StaticString, id: UInt64 = 1) -> SymmetricKey {
        _ = Sodium.ready
        precondition(context.utf8CodeUnitCount == Int(crypto_kdf_CONTEXTBYTES), "KDF contexts are 8 bytes")
        let sub = SecureBytes(count: SymmetricKey.byteCount)
        withUnsafeBytes { master in
            context.withUTF8Buffer { ctx in
                ctx.withMemoryRebound(to: CChar.self) { c in
                    Sodium.check(
                        crypto_kdf_derive_from_key(
                            sub.buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), SymmetricKey.byteCount, id,
                            c.baseAddress!, master.bindMemory(to: UInt8.self).baseAddress!), "crypto_kdf_derive_from_key")
                }
            }
        }
        return SymmetricKey(storage: sub)
    }

    /// A key bound to both this key and `material` (keyed BLAKE2b of the material). Tangles a
    /// passcode-derived key with the device's UID so neither alone opens the keybag.
    package func tangled(with material: SymmetricKey) -> SymmetricKey {
        var bytes = material.withUnsafeBytes { KeyedHash.digest(of: $0, key: self, length: SymmetricKey.byteCount) }
        defer { SymmetricKey.wipe(&bytes) }
        return try! SymmetricKey(bytes: bytes)
    }
}

/// Argon2id cost parameters. Stored beside every hash they produced so a later reader can
/// recompute it.
public struct PasswordHashParameters: Codable, Equatable, Sendable {
    public var operations: UInt64
    public var memoryBytes: UInt64

    public init(operations: UInt64, memoryBytes: UInt64) {
        self.operations = operations
        self.memoryBytes = memoryBytes
    }

    /// libsodium's "interactive" level (about 0.15 s and 64 MiB): what a device uses.
    public static let interactive = PasswordHashParameters(
        operations: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE), memoryBytes: UInt64(crypto_pwhash_MEMLIMIT_INTERACTIVE))
    /// The cheapest parameters libsodium accepts; for tests, never for real secrets.
    public static let minimum = PasswordHashParameters(
        operations: UInt64(crypto_pwhash_OPSLIMIT_MIN), memoryBytes: UInt64(crypto_pwhash_MEMLIMIT_MIN))

    package static let saltByteCount = Int(crypto_pwhash_SALTBYTES)
}

package enum PasswordHash {
    /// Argon2id (v1.3) of `password` into a 32-byte key.
    package static func argon2id(
        password: some ContiguousBytes, salt: [UInt8], parameters: PasswordHashParameters
    ) throws -> SymmetricKey {
        _ = Sodium.ready
        guard salt.count == PasswordHashParameters.saltByteCount else {
            throw CryptoError.invalidLength(expected: PasswordHashParameters.saltByteCount, actual: salt.count)
        }
        guard let memory = Int(exactly: parameters.memoryBytes) else { throw CryptoError.passwordHashingFailed }
        let out = SecureBytes(count: SymmetricKey.byteCount)
        let status = password.withUnsafeBytes { p in
            crypto_pwhash(
                out.buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(SymmetricKey.byteCount),
                UnsafeRawPointer(p.sodiumBase).assumingMemoryBound(to: CChar.self), UInt64(p.count), salt,
                parameters.operations, memory, crypto_pwhash_ALG_ARGON2ID13)
        }
        guard status == 0 else { throw CryptoError.passwordHashingFailed }
        return SymmetricKey(storage: out)
    }
}

/// Constant-time comparison of two byte strings of equal length.
package func constantTimeEqual(_ a: some ContiguousBytes, _ b: some ContiguousBytes) -> Bool {
    _ = Sodium.ready
    return a.withUnsafeBytes { x in
        b.withUnsafeBytes { y in x.count == y.count && sodium_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
    }
}

/// Unkeyed BLAKE2b-256: a content digest that every node computes alike, such as the tie-break
/// between two versions of an item.
package enum ContentDigest {
    package static func of(_ message: some ContiguousBytes) -> [UInt8] {
        message.withUnsafeBytes { KeyedHash.digestRaw($0, keyBytes: UnsafeRawBufferPointer(start: nil, count: 0), length: 32) }
    }
}
