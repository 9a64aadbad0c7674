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
        let expected =
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e"
            + "c0875924c1c7987947deafd8780acf49"
        #expect(hex(sealed.dropFirst(AEAD.nonceByteCount)) == expected)
        #expect(try AEAD.open(sealed, key: key, associatedData: ad) == Data(plaintext))
        #expect(try AEAD.openBytes(sealed, key: key, associatedData: ad) == plaintext)
        let empty = AEAD.seal([UInt8](), key: key, nonce: nonce, associatedData: ad)
        #expect(try AEAD.openBytes(empty, key: key, associatedData: ad) == [])
    }

    @Test("any edited byte, other associated data or another key fails authentication")
    func aeadRejectsTampering() throws {
        let key = SymmetricKey()
        let sealed = AEAD.seal(Array("secret".utf8), key: key, associatedData: Array("row-1".utf8))
        for index in sealed.indices {
            var edited = sealed
            edited[index] ^= 0x80
            #expect(throws: CryptoError.authenticationFailed) { try AEAD.open(edited, key: key, associatedData: Array("row-1".utf8)) }
            #expect(throws: CryptoError.authenticationFailed) { try AEAD.openBytes(edited, key: key, associatedData: Array("row-1".utf8)) }
        }
        let opens: [(Data, SymmetricKey, [UInt8]) throws -> [UInt8]] = [
            { [UInt8](try AEAD.open($0, key: $1, associatedData: $2)) }, { try AEAD.openBytes($0, key: $1, associatedData: $2) },
        ]
        for open in opens {
            // A box shorter than its nonce and tag, empty included, is refused before the cipher.
            for length in [0, 10, AEAD.overhead - 1] {
                #expect(throws: CryptoError.authenticationFailed) { try open(sealed.prefix(length), key, Array("row-1".utf8)) }
            }
            #expect(throws: CryptoError.authenticationFailed) { try open(sealed, key, Array("row-2".utf8)) }
            #expect(throws: CryptoError.authenticationFailed) { try open(sealed, SymmetricKey(), Array("row-1".utf8)) }
        }
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

    // RFC 8032, section 7.1, tests 1 and 2.
    @Test(
        "Ed25519 matches RFC 8032 and rejects an edited message, signature or signer",
        arguments: [
            (
                "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
            ),
            (
                "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
            ),
        ])
    func ed25519(seed: String, publicKey: String, message: String, signature: String) throws {
        let key = SigningKey(seed: try SymmetricKey(bytes: hex(seed)))
        #expect(hex(key.publicKey.bytes) == publicKey)
        let signed = key.signature(for: hex(message))
        #expect(hex(signed) == signature)
        #expect(key.publicKey.isValidSignature(signed, for: hex(message)))
        #expect(!key.publicKey.isValidSignature(signed, for: hex(message) + [0]))
        var edited = signed
        edited[5] ^= 1
        #expect(!key.publicKey.isValidSignature(edited, for: hex(message)))
        #expect(!key.publicKey.isValidSignature(signed.dropLast(), for: hex(message)))
        #expect(!SigningKey(seed: SymmetricKey()).publicKey.isValidSignature(signed, for: hex(message)))
        #expect(try SigningPublicKey(bytes: hex(publicKey)) == key.publicKey)
        #expect(throws: CryptoError.invalidLength(expected: 32, actual: 31)) { try SigningPublicKey(bytes: Array(hex(publicKey).dropLast())) }
    }

    @Test("a sealed key opens only for its recipient, and never once edited")
    func sealedBoxes() throws {
        let seed = try SymmetricKey(bytes: Array(repeating: 7, count: 32))
        let recipient = SealingKey(seed: seed)
        #expect(SealingKey(seed: seed).publicKey == recipient.publicKey, "the seed is the whole key")
        let key = SymmetricKey()
        let box = recipient.publicKey.wrap(key)
        #expect(box.count == SealingPublicKey.wrappedKeyByteCount)
        #expect(recipient.publicKey.wrap(key) != box, "a fresh ephemeral key every time")
        #expect(try recipient.unwrap(box) == key)
        #expect(throws: CryptoError.authenticationFailed) { try SealingKey(seed: SymmetricKey()).unwrap(box) }
        for index in [0, 31, 32, box.count - 1] {
            var edited = box
            edited[index] ^= 0x40
            #expect(throws: CryptoError.authenticationFailed) { try recipient.unwrap(edited) }
        }
        #expect(throws: CryptoError.authenticationFailed) { try recipient.unwrap(box.dropLast()) }
    }
}

enum KnownAnswers {
    static let kdfUIDWrap = "f7c687541ab1d3790bcfaeb56988802520d348f43f6de16ba6e43543310937d5"
}
