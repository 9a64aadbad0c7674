package import Crypto
import Foundation
import _CryptoExtras

/// AES-GCM as an iOS backup seals its keychain items: with an *empty* IV (and, in the older
/// "default IV" mode, a 12-byte one with AAD). GCM allows any IV length, but libraries refuse
/// all but 12 bytes, so this builds it from the AES block function and GHASH (NIST SP 800-38D).
/// An empty IV makes J0 = GHASH_H(one zero block) = 0: the keystream is E(K, 1), E(K, 2)… and
/// the tag is GHASH_H(ciphertext, lengths) XOR E(K, 0).
package enum KeychainGCM {
    package static let tagByteCount = 16

    /// `plaintext` sealed under `key` (16, 24 or 32 bytes): ciphertext, then the tag.
    package static func seal(_ plaintext: [UInt8], key: SymmetricKey, iv: [UInt8] = [], aad: [UInt8] = []) throws -> [UInt8] {
        let cipher = try Cipher(key: key, iv: iv)
        let ciphertext = try cipher.crypt(plaintext)
        return ciphertext + (try cipher.tag(aad: aad, ciphertext: ciphertext))
    }

    /// The plaintext of `sealed` (ciphertext, then the tag); `KeychainGCMError` when the tag
    /// does not match (another key, or altered bytes).
    package static func open(_ sealed: [UInt8], key: SymmetricKey, iv: [UInt8] = [], aad: [UInt8] = []) throws -> [UInt8] {
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
        let hashKey: GHash.Table
        let initialCounter: [UInt8]

        init(key: SymmetricKey, iv: [UInt8]) throws {
            self.key = key
            var zero = [UInt8](repeating: 0, count: 16)
            try AES.permute(&zero, key: key)
            hashKey = GHash.Table(Block(zero))
            if iv.count == 12 {
                initialCounter = iv + [0, 0, 0, 1]
            } else {
                var hash = GHash(table: hashKey)
                hash.absorb(iv)
                hash.absorbLengths(0, UInt64(iv.count) * 8)
                initialCounter = hash.value.bytes
            }
        }

        /// CTR from inc32(J0): encrypts or decrypts alike. GCM increments only the last 32
        /// bits; BoringSSL's CTR increments all 128, which is the same unless those 32 bits wrap
        /// within the message (possible only for an IV hashed to J0): then block by block.
        func crypt(_ input: [UInt8]) throws -> [UInt8] {
            var counter = initialCounter
            Self.increment(&counter)
            let blocks = UInt64((input.count + 15) / 16)
            if UInt64(BigEndian.number(counter[12..<16])) + blocks <= UInt64(UInt32.max) + 1 {
                return Array(try AES._CTR.encrypt(input, using: key, nonce: try AES._CTR.Nonce(nonceBytes: counter)))
            }
            var output = [UInt8]()
            output.reserveCapacity(input.count)
            var offset = 0
            while offset < input.count {
                var stream = counter
                try AES.permute(&stream, key: key)
                for index in offset..<min(offset + 16, input.count) { output.append(input[index] ^ stream[index - offset]) }
                Self.increment(&counter)
                offset += 16
            }
            return output
        }

        func tag(aad: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
            var hash = GHash(table: hashKey)
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
    struct Block: Equatable {
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

        static func ^ (lhs: Block, rhs: Block) -> Block { Block(high: lhs.high ^ rhs.high, low: lhs.low ^ rhs.low) }

        /// This element times x: one bit towards the end, reduced by GCM's polynomial.
        var timesX: Block {
            Block(high: (high >> 1) ^ (low & 1 == 1 ? 0xE100_0000_0000_0000 : 0), low: (low >> 1) | (high << 63))
        }

        /// Multiplication in GF(2^128), one bit at a time (SP 800-38D, algorithm 1): the
        /// definition, kept to check the table method against.
        func times(_ other: Block) -> Block {
            var product = Block()
            var multiple = other
            for bit in 0..<128 {
                let set = bit < 64 ? (high >> (63 - UInt64(bit))) & 1 : (low >> (127 - UInt64(bit))) & 1
                if set == 1 { product = product ^ multiple }
                multiple = multiple.timesX
            }
            return product
        }
    }

    /// GHASH over blocks, each zero-padded to 16 bytes, multiplying by H four bits at a time
    /// with a table of H's sixteen multiples (Shoup's method; McGrew and Viega, "The Galois/Counter
    /// Mode of Operation", section 4.1).
    struct GHash {
        /// The sixteen multiples of H by a four-bit element, built once per key.
        struct Table {
            let multiples: [Block]

            init(_ hashKey: Block) {
                var multiples = [Block](repeating: Block(), count: 16)
                // Index bits are read most significant first: 8 is H, 4 is H·x, 2 is H·x², 1 is H·x³.
                multiples[8] = hashKey
                multiples[4] = multiples[8].timesX
                multiples[2] = multiples[4].timesX
                multiples[1] = multiples[2].timesX
                for high in [2, 4, 8] {
                    for low in 1..<high { multiples[high + low] = multiples[high] ^ multiples[low] }
                }
                self.multiples = multiples
            }

            /// What shifting four bits off the end adds back at the top, by the bits shifted off.
            static let reduction: [UInt64] = [
                0x0000, 0x1C20, 0x3840, 0x2460, 0x7080, 0x6CA0, 0x48C0, 0x54E0, 0xE100, 0xFD20, 0xD940, 0xC560, 0x9180, 0x8DA0, 0xA9C0, 0xB5E0,
            ].map { $0 << 48 }

            /// `value` times H: its nibbles from the last to the first, the product so far
            /// shifted four bits (times x⁴) before each.
            func multiply(_ value: Block) -> Block {
                multiples.withUnsafeBufferPointer { multiples in Self.reduction.withUnsafeBufferPointer { Self.multiply(value, multiples, $0) } }
            }

            /// The loop of `multiply`, on the tables' memory: GHASH runs it once per block.
            static func multiply(_ value: Block, _ multiples: UnsafeBufferPointer<Block>, _ reduction: UnsafeBufferPointer<UInt64>) -> Block {
                var product = Block()
                for index in stride(from: 31, through: 0, by: -1) {
                    let word = index < 16 ? value.high : value.low
                    let nibble = Int((word >> (UInt64(15 - index % 16) * 4)) & 0xF)
                    if index != 31 {
                        let dropped = Int(product.low & 0xF)
                        product = Block(high: (product.high >> 4) ^ reduction[dropped], low: (product.low >> 4) | (product.high << 60))
                    }
                    product = product ^ multiples[nibble]
                }
                return product
            }
        }

        let table: Table
        var value = Block()

        init(table: Table) { self.table = table }

        mutating func absorb(_ bytes: [UInt8]) {
            var offset = 0
            var value = self.value
            bytes.withUnsafeBytes { buffer in
                table.multiples.withUnsafeBufferPointer { multiples in
                    Table.reduction.withUnsafeBufferPointer { reduction in
                        while offset + 16 <= buffer.count {
                            let block = Block(
                                high: UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)),
                                low: UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                            value = Table.multiply(value ^ block, multiples, reduction)
                            offset += 16
                        }
                    }
                }
            }
            self.value = value
            if offset < bytes.count { self.value = table.multiply(value ^ Block(bytes[offset...])) }
        }

        mutating func absorbLengths(_ first: UInt64, _ second: UInt64) {
            value = table.multiply(value ^ Block(high: first, low: second))
        }
    }
}

/// Why `KeychainGCM.open` refused its input.
package enum KeychainGCMError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort
    case tagMismatch

    package var description: String {
        switch self {
        case .tooShort: "the sealed item is shorter than its 16-byte tag"
        case .tagMismatch: "the sealed item's tag does not match: another key, or altered bytes"
        }
    }
}
