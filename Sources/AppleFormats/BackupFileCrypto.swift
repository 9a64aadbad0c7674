package import Crypto
package import Foundation
import _CryptoExtras

/// How an iOS backup names and seals its files (`IOS-BACKUP.md`, sections 1, 4 and 7).
package enum BackupFileCrypto {
    /// A file's name in the backup: the lowercase hex SHA-1 of `DOMAIN-RELATIVEPATH`, stored at
    /// `ID[0..1]/ID`.
    package static func fileID(domain: String, relativePath: String) -> String {
        Insecure.SHA1.hash(data: Array("\(domain)-\(relativePath)".utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// AES-256-CBC with sixteen zero bytes of IV and PKCS#7 padding, as every blob and the
    /// Manifest.db are sealed. No MAC exists: the padding is the only check.
    package static func seal(_ plaintext: some DataProtocol, key: SymmetricKey) throws -> Data {
        try AES._CBC.encrypt(plaintext, using: key, iv: zeroIV)
    }

    /// The plaintext of a CBC blob. With `requirePadding` false (Manifest.db, which some
    /// writers leave unpadded), a whole number of blocks whose padding does not check is
    /// returned as it is.
    package static func open(_ ciphertext: some DataProtocol, key: SymmetricKey, requirePadding: Bool = true) throws -> Data {
        guard ciphertext.count % 16 == 0, !ciphertext.isEmpty else { throw BackupFileCryptoError.notWholeBlocks(ciphertext.count) }
        do {
            return try AES._CBC.decrypt(ciphertext, using: key, iv: zeroIV)
        } catch {
            guard !requirePadding else { throw BackupFileCryptoError.badPadding }
            return try AES._CBC.decrypt(ciphertext, using: key, iv: zeroIV, noPadding: true)
        }
    }

    private static let zeroIV = try! AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16))
}

/// A key wrapped under a class key, as `ManifestKey` and a file's `EncryptionKey` carry it: a
/// little-endian u32 protection class, then the 40-byte RFC 3394 wrap of a 32-byte key.
package struct ClassWrappedKey: Equatable, Sendable {
    package var protectionClass: UInt32
    package var wrapped: [UInt8]

    package init(protectionClass: UInt32, wrapped: [UInt8]) {
        self.protectionClass = protectionClass
        self.wrapped = wrapped
    }

    /// `key` wrapped under `classKey`, for class `protectionClass`.
    package init(wrapping key: SymmetricKey, protectionClass: UInt32, under classKey: SymmetricKey) throws {
        self.protectionClass = protectionClass
        wrapped = Array(try AES.KeyWrap.wrap(key, using: classKey))
    }

    package init(bytes: some Collection<UInt8>) throws {
        let bytes = Array(bytes)
        guard bytes.count == 44 else { throw BackupFileCryptoError.wrappedKeyLength(bytes.count) }
        protectionClass = bytes[0..<4].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        wrapped = Array(bytes[4...])
    }

    package var bytes: [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: protectionClass >> (8 * $0)) } + wrapped }

    /// The key, under the class key of its class; `unwrapFailed` under any other.
    package func unwrap(with classKey: SymmetricKey) throws -> SymmetricKey {
        do {
            return try AES.KeyWrap.unwrap(wrapped, using: classKey)
        } catch {
            throw BackupFileCryptoError.unwrapFailed(protectionClass)
        }
    }
}

package enum BackupFileCryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    case notWholeBlocks(Int)
    case badPadding
    case wrappedKeyLength(Int)
    case unwrapFailed(UInt32)

    package var description: String {
        switch self {
        case .notWholeBlocks(let count): "an encrypted blob of \(count) bytes, not a whole number of 16-byte blocks"
        case .badPadding: "an encrypted blob whose padding does not check: damaged, or under another key"
        case .wrappedKeyLength(let count): "a wrapped key of \(count) bytes, not 4 + 40"
        case .unwrapFailed(let protectionClass): "a key wrapped under class \(protectionClass) does not unwrap with that class's key"
        }
    }
}
