import Foundation
import KeyferryCrypto
import Testing

func hex(_ string: String) -> [UInt8] {
    var out = [UInt8]()
    var index = string.startIndex
    while index < string.endIndex {
        let next = string.index(index, offsetBy: 2)
        out.append(UInt8(string[index..<next], radix: 16)!)
        index = next
    }
    return out
}

func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("Crypto")
struct CryptoTests {
    // draft-irtf-cfrg-xchacha-03, appendix A.3.1.
    @Test("XChaCha20-Poly1305 matches the published test vector")
    func xchachaVector() throws {
        let key = try SymmetricKey(bytes: hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"))
        let nonce = hex("404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = hex("50515253c0c1c2c3c4c5c6c7")
        let plaintext = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let sealed = AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: ad)
        let expected = "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e"
            + "c0875924c1c7987947deafd8780acf49"
        #expect(hex(sealed.dropFirst(AEAD.nonceByteCount)) == expected)
        #expect(try AEAD.open(sealed, key: key, associatedData: ad) == Data(plaintext))
    }

    @Test("any edited byte, other associated data or another key fails authentication")
    func aeadRejectsTampering() throws {
        let key = SymmetricKey()
        let sealed = AEAD.seal(Array("secret".utf8), key: key, associatedData: Array("row-1".utf8))
        for index in sealed.indices {
            var edited = sealed
            edited[index] ^= 0x80
            #expect(throws: CryptoError.authenticationFailed) { try AEAD.open(edited, key: key, associatedData: Array("row-1".utf8)) }
        }
        #expect(throws: CryptoError.authenticationFailed) { try AEAD.open(sealed, key: key, associatedData: Array("row-2".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try AEAD.open(sealed, key: SymmetricKey(), associatedData: Array("row-1".utf8)) }
        #expect(throws: CryptoError.authenticationFailed) { try AEAD.open(sealed.prefix(10), key: key, associatedData: Array("row-1".utf8)) }
    }

    @Test("subkeys depend on context and id; keyed hashes on the key")
    func derivation() throws {
        let master = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        #expect(master.derive(context: "kfuidwrp") == master.derive(context: "kfuidwrp"))
        #expect(master.derive(context: "kfuidwrp") != master.derive(context: "kfindex_"))
        #expect(master.derive(context: "kfuidwrp", id: 1) != master.derive(context: "kfuidwrp", id: 2))
        let message = Array("account".utf8)
        #expect(KeyedHash.digest(of: message, key: master) == KeyedHash.digest(of: message, key: master))
        #expect(KeyedHash.digest(of: message, key: master) != KeyedHash.digest(of: message, key: SymmetricKey()))
    }

    // crypto_kdf is BLAKE2b(key: master, salt: id, personal: context); recomputed independently
    // with Python's hashlib.blake2b for this vector.
    @Test("crypto_kdf subkey vector")
    func kdfVector() throws {
        let master = try SymmetricKey(bytes: (0..<32).map { UInt8($0) })
        #expect(hex(master.derive(context: "kfuidwrp").exportedBytes) == KnownAnswers.kdfUIDWrap)
    }

    @Test("Argon2id is deterministic for a salt and rejects a bad salt length")
    func argon2id() throws {
        let salt = [UInt8](repeating: 1, count: PasswordHashParameters.saltByteCount)
        let a = try PasswordHash.argon2id(password: Array("123456".utf8), salt: salt, parameters: .minimum)
        let b = try PasswordHash.argon2id(password: Array("123456".utf8), salt: salt, parameters: .minimum)
        let c = try PasswordHash.argon2id(password: Array("123457".utf8), salt: salt, parameters: .minimum)
        #expect(a == b)
        #expect(a != c)
        #expect(throws: CryptoError.invalidLength(expected: 16, actual: 3)) {
            try PasswordHash.argon2id(password: Array("x".utf8), salt: [1, 2, 3], parameters: .minimum)
        }
    }

    @Test("seeded entropy repeats per seed and differs across seeds")
    func seededEntropy() {
        #expect(SeededEntropy(seed: 1).bytes(40) == SeededEntropy(seed: 1).bytes(40))
        #expect(SeededEntropy(seed: 1).bytes(40) != SeededEntropy(seed: 2).bytes(40))
        let stream = SeededEntropy(seed: 3)
        #expect(stream.bytes(16) != stream.bytes(16))
        #expect(SystemEntropy().bytes(32) != SystemEntropy().bytes(32))
    }

    @Test("keys compare in constant time and refuse the wrong length")
    func keys() throws {
        #expect(throws: CryptoError.invalidLength(expected: 32, actual: 31)) { try SymmetricKey(bytes: [UInt8](repeating: 0, count: 31)) }
        #expect(constantTimeEqual([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        #expect(!constantTimeEqual([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!constantTimeEqual([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
    }
}

enum KnownAnswers {
    static let kdfUIDWrap = "f7c687541ab1d3790bcfaeb56988802520d348f43f6de16ba6e43543310937d5"
}
