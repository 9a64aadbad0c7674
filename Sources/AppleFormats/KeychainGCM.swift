import Crypto
import Foundation
import _CryptoExtras

/// AES-GCM as an iOS backup seals its keychain items: with an *empty* IV (and, in the older
/// "default IV" mode, a 12-byte one with AAD). GCM allows any IV length, but libraries refuse
/// all but 12 bytes, so this builds it from the AES block function and GHASH (NIST SP 800-38D).
/// An empty IV makes J0 = GHASH_H(one zero block) = 0: the keystream is E(K, 1), E(K, 2)… and
/// the tag is GHASH_H(ciphertext, lengths) XOR E(K, 0).
public enum KeychainGCM {
    public static let tagByteCount = 16

    /// `plaintext` sealed under `key` (16, 24 or 32 bytes): ciphertext, then the tag.
    public static func seal(_ plaintext: [UInt8], key: SymmetricKey, iv: [UInt8] = [], aad: [UInt8] = []) throws -> [UInt8] {
        let cipher = try Cipher(key: key, iv: iv)
        let ciphertext = try cipher.crypt(plaintext)
        return ciphertext + (try cipher.tag(aad: aad, ciphertext: ciphertext))
    }

    /// The plaintext of `sealed` (ciphertext, then the tag); `KeychainGCMError` when the tag
    /// does not match (another key, or altered bytes).
    public static func open(_ sealed: [UInt8], key: SymmetricKey, iv: [UInt8] = [], aad: [UInt8] = []) throws -> [UInt8] {
        guard sealed.count >= tagByteCount else { throw KeychainGCMError.tooShort }
        let ciphertext = Array(sealed.dropLast(tagByteCount))
        let cipher = try Cipher(key: key, iv: iv)
        let expected = try cipher.tag(aad: aad, ciphertext: ciphertext)
        // Compared in full whatever differs, so the time taken says nothing about where.
        guard zip(expected, sealed.suffix(tagByteCount)).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else { throw KeychainGCMError.tagMismatch }
        return try cipher.crypt(ciphertext)
    }

    /// One key and IV: H, J0, and the counter mode and GHASH built on them.
    private struct Cipher {
        let key: SymmetricKey
        let hashKey: Block
        let initialCounter: [UInt8]

        init(key: SymmetricKey, iv: [UInt8]) throws {
            self.key = key
            var zero = [UInt8](repeating: 0, count: 16)
            try AES.permute(&zero, key: key)
            hashKey = Block(zero)
            if iv.count == 12 {
                initialCounter = iv + [0, 0, 0, 1]
            } else {
                var hash = GHash(key: hashKey)
                hash.absorb(iv)
                hash.absorbLengths(0, UInt64(iv.count) * 8)
                initialCounter = hash.value.bytes
            }
        }

        /// CTR from inc32(J0): encrypts or decrypts alike.
        func crypt(_ input: [UInt8]) throws -> [UInt8] {
            var output = [UInt8]()
            output.reserveCapacity(input.count)
            var counter = initialCounter
            var offset = 0
            while offset < input.count {
                Self.increment(&counter)
                var stream = counter
                try AES.permute(&stream, key: key)
                for index in offset..<min(offset + 16, input.count) { output.append(input[index] ^ stream[index - offset]) }
                offset += 16
            }
            return output
        }

        func tag(aad: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
            var hash = GHash(key: hashKey)
            hash.absorb(aad)
            hash.absorb(ciphertext)
            hash.absorbLengths(UInt64(aad.count) * 8, UInt64(ciphertext.count) * 8)
            var mask = initialCounter
            try AES.permute(&mask, key: key)
            return zip(hash.value.bytes, mask).map { $0 ^ $1 }
        }

        /// The last 32 bits, big-endian, plus one (wrapping), as GCM counts.
        static func increment(_ counter: inout [UInt8]) {
            for index in stride(from: 15, through: 12, by: -1) {
                counter[index] &+= 1
                if counter[index] != 0 { return }
            }
        }
    }

    /// A 128-bit block as GCM's field element: bit 0 is the high bit of the first byte.
    struct Block {
        var high: UInt64
        var low: UInt64

        init(high: UInt64 = 0, low: UInt64 = 0) {
            self.high = high
            self.low = low
        }

        init(_ bytes: some Collection<UInt8>) {
            var padded = Array(bytes)
            padded += [UInt8](repeating: 0, count: 16 - padded.count)
            high = BigEndian.number(padded[0..<8])
            low = BigEndian.number(padded[8..<16])
        }

        var bytes: [UInt8] { BigEndian.bytes(high, count: 8) + BigEndian.bytes(low, count: 8) }

        /// Multiplication in GF(2^128) with GCM's polynomial and bit order (SP 800-38D, 6.3).
        func times(_ other: Block) -> Block {
            var product = Block()
            var multiple = other
            for bit in 0..<128 {
                let set = bit < 64 ? (high >> (63 - UInt64(bit))) & 1 : (low >> (127 - UInt64(bit))) & 1
                if set == 1 {
                    product.high ^= multiple.high
                    product.low ^= multiple.low
                }
                let carry = multiple.low & 1
                multiple.low = (multiple.low >> 1) | (multiple.high << 63)
                multiple.high >>= 1
                if carry == 1 { multiple.high ^= 0xE100_0000_0000_0000 }
            }
            return product
        }
    }

    /// GHASH over blocks, each zero-padded to 16 bytes.
    struct GHash {
        let key: Block
        var value = Block()

        init(key: Block) { self.key = key }

        mutating func absorb(_ bytes: [UInt8]) {
            var offset = 0
            while offset < bytes.count {
                let block = Block(bytes[offset..<min(offset + 16, bytes.count)])
                value = Block(high: value.high ^ block.high, low: value.low ^ block.low).times(key)
                offset += 16
            }
        }

        mutating func absorbLengths(_ first: UInt64, _ second: UInt64) {
            value = Block(high: value.high ^ first, low: value.low ^ second).times(key)
        }
    }
}

/// Why `KeychainGCM.open` refused its input.
public enum KeychainGCMError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort
    case tagMismatch

    public var description: String {
        switch self {
        case .tooShort: "the sealed item is shorter than its 16-byte tag"
        case .tagMismatch: "the sealed item's tag does not match: another key, or altered bytes"
        }
    }
}
