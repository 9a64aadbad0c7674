import Foundation
import KeychainModel
import KeychainTesting
import KeyferrySecurity
import Testing

/// SecKey as app code calls it; every signature and ciphertext that leaves or enters Keyferry is
/// checked by openssl, the other side.
@Suite("SecKey")
struct SecKeyTests: OpenSSLTesting {
    let t: TestDevice
    let context: KeyferryContext
    let work: URL

    init() throws {
        t = try TestDevice()
        context = KeyferryContext(device: t.device, app: TestDevice.appID, passcode: t.passcode)
        work = t.directory.deletingLastPathComponent().appendingPathComponent("openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    // The DER that goes before an X9.63 point to make a SubjectPublicKeyInfo openssl reads:
    // SEQUENCE { SEQUENCE { id-ecPublicKey, the curve }, BIT STRING }, from RFC 5480.
    static let spkiPrefix: [Int: String] = [
        256: "3059301306072a8648ce3d020106082a8648ce3d030107034200",
        384: "3076301006072a8648ce3d020106052b81040022036200",
        521: "30819b301006072a8648ce3d020106052b8104002303818600",
    ]

    func randomKey(_ type: CFString, bits: Int, _ extra: [CFString: Any] = [:]) throws -> SecKey {
        var error: Unmanaged<CFError>?
        let parameters: [CFString: Any] = [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits].merging(extra) { $1 }
        let key = context.run { SecKeyCreateRandomKey(parameters as CFDictionary, &error) }
        #expect(error == nil, "\(error?.takeRetainedValue().description ?? "")")
        return try #require(key)
    }

    @Test(
        "EC keys on P-256, P-384 and P-521: X9.63 representations, ECDSA signatures openssl verifies, and openssl's that Keyferry verifies",
        arguments: [256, 384, 521])
    func ellipticCurve(bits: Int) throws {
        let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits: bits)
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, nil))
        let coordinate = (bits + 7) / 8
        #expect(point.count == 1 + 2 * coordinate && point.first == 0x04)
        #expect(SecKeyCopyExternalRepresentation(key, nil)?.count == 1 + 3 * coordinate)

        let hashes: [(SecKeyAlgorithm, String)] = [
            (.ecdsaSignatureMessageX962SHA256, "-sha256"), (.ecdsaSignatureMessageX962SHA384, "-sha384"), (.ecdsaSignatureMessageX962SHA512, "-sha512"),
        ]
        let message = Data("a message from the app".utf8)
        let spki = Data(Array(hex: Self.spkiPrefix[bits]!)) + point
        let publicPath = try file("ec-\(bits).der", spki)
        for (algorithm, digest) in hashes {
            #expect(SecKeyIsAlgorithmSupported(key, .sign, algorithm))
            var error: Unmanaged<CFError>?
            let signature = try #require(SecKeyCreateSignature(key, algorithm, message, &error))
            #expect(SecKeyVerifySignature(publicKey, algorithm, message, signature, &error))
            try openssl([
                "dgst", digest, "-verify", publicPath, "-keyform", "DER", "-signature", try file("sig", signature), try file("msg", message),
            ])
            #expect(
                try !opensslAccepts([
                    "dgst", digest, "-verify", publicPath, "-keyform", "DER", "-signature", try file("sig", signature), try file("other", message + Data([0])),
                ]))
            #expect(!SecKeyVerifySignature(publicKey, algorithm, message + Data([0]), signature, &error))
            #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecVerifyFailed))
        }

        // openssl's key and signature, read and checked by Keyferry.
        let curve = [256: "prime256v1", 384: "secp384r1", 521: "secp521r1"][bits]!
        try openssl(["ecparam", "-name", curve, "-genkey", "-noout", "-out", "theirs.pem"])
        let theirSPKI = try openssl(["pkey", "-in", "theirs.pem", "-pubout", "-outform", "DER"])
        let theirPoint = theirSPKI.suffix(1 + 2 * coordinate)
        var error: Unmanaged<CFError>?
        let theirs = try #require(
            SecKeyCreateWithData(
                Data(theirPoint), [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary, &error))
        let theirSignature = try openssl(["dgst", "-sha256", "-sign", "theirs.pem", try file("msg", message)])
        #expect(SecKeyVerifySignature(theirs, .ecdsaSignatureMessageX962SHA256, message, theirSignature, &error))
        #expect(!SecKeyIsAlgorithmSupported(theirs, .sign, .ecdsaSignatureMessageX962SHA256), "a public key does not sign")
    }

    @Test("RSA: PKCS #1 representations, PKCS #1 v1.5 and PSS signatures and OAEP ciphertexts that openssl checks, both ways")
    func rsa() throws {
        try openssl(["genrsa", "-out", "theirs.pem", "2048"])
        let pkcs1 = try openssl(["rsa", "-in", "theirs.pem", "-outform", "DER", "-traditional"])
        var error: Unmanaged<CFError>?
        let key = try #require(
            SecKeyCreateWithData(pkcs1, [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as CFDictionary, &error),
            "\(error?.takeRetainedValue().description ?? "")")
        #expect(SecKeyGetBlockSize(key) == 256)
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let publicDER = try #require(SecKeyCopyExternalRepresentation(publicKey, nil))
        let publicPath = try file("rsa-public.der", publicDER)
        // openssl reads Keyferry's public key as PKCS #1 and finds it the same key.
        let theirPublic = try openssl(["rsa", "-in", "theirs.pem", "-RSAPublicKey_out", "-outform", "DER"])
        #expect(publicDER == theirPublic)

        let message = Data("a message from the app".utf8)
        let signatures: [(SecKeyAlgorithm, [String])] = [
            (.rsaSignatureMessagePKCS1v15SHA256, ["-sha256"]), (.rsaSignatureMessagePKCS1v15SHA384, ["-sha384"]),
            (.rsaSignatureMessagePSSSHA256, ["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"]),
            (.rsaSignatureMessagePSSSHA512, ["-sha512", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"]),
        ]
        let publicPEM = try openssl(["rsa", "-pubin", "-RSAPublicKey_in", "-inform", "DER", "-in", publicPath, "-pubout"])
        let pemPath = try file("rsa-public.pem", publicPEM)
        for (algorithm, options) in signatures {
            let signature = try #require(SecKeyCreateSignature(key, algorithm, message, &error), "\(algorithm.rawValue)")
            try openssl(["dgst"] + options + ["-verify", pemPath, "-signature", try file("sig", signature), try file("msg", message)])
            #expect(
                try !opensslAccepts(
                    ["dgst"] + options + ["-verify", pemPath, "-signature", try file("sig", signature), try file("other", message + Data([0]))]))
            let theirs = try openssl(["dgst"] + options + ["-sign", "theirs.pem", try file("msg", message)])
            #expect(SecKeyVerifySignature(publicKey, algorithm, message, theirs, &error), "\(algorithm.rawValue)")
        }

        let secret = Data("a secret for the server".utf8)
        let oaep = ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"]
        let ciphertext = try #require(SecKeyCreateEncryptedData(publicKey, .rsaEncryptionOAEPSHA256, secret, &error))
        #expect(try openssl(["pkeyutl", "-decrypt", "-inkey", "theirs.pem", "-in", try file("ct", ciphertext)] + oaep) == secret)
        let theirCiphertext = try openssl(["pkeyutl", "-encrypt", "-pubin", "-inkey", pemPath, "-in", try file("pt", secret)] + oaep)
        #expect(SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, theirCiphertext, &error) == secret)
        #expect(SecKeyCreateDecryptedData(key, .rsaEncryptionOAEPSHA256, Data(theirCiphertext.reversed()), &error) == nil)
        #expect(SecKeyCreateEncryptedData(publicKey, .eciesEncryptionCofactorX963SHA256AESGCM, secret, &error) == nil, "ECIES needs an EC key")
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecUnimplemented))
        #expect(SecKeyCreateEncryptedData(key, .rsaEncryptionOAEPSHA256, secret, &error) == nil, "a private key does not encrypt")
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecUnimplemented))
    }

    @Test("ECDH: the shared secret and its X9.63 SHA-256 derivation are what openssl computes with the other side's key")
    func keyExchange() throws {
        let mine = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits: 256)
        let minePublicKey = try #require(SecKeyCopyPublicKey(mine))
        let minePublic = try #require(SecKeyCopyExternalRepresentation(minePublicKey, nil))
        try openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "theirs.pem"])
        let theirSPKI = try openssl(["pkey", "-in", "theirs.pem", "-pubout", "-outform", "DER"])
        var error: Unmanaged<CFError>?
        let theirs = try #require(
            SecKeyCreateWithData(
                Data(theirSPKI.suffix(65)), [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary,
                &error))
        let shared = try #require(SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeStandard, theirs, [:] as CFDictionary, &error))
        let mineSPKI = try file("mine.der", Data(Array(hex: Self.spkiPrefix[256]!)) + minePublic)
        #expect(try openssl(["pkeyutl", "-derive", "-inkey", "theirs.pem", "-peerkey", mineSPKI, "-peerform", "DER"]) == shared)
        #expect(SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeCofactor, theirs, [:] as CFDictionary, &error) == shared)

        let info = Data("app-v1".utf8)
        let parameters: [String: Any] = [
            SecKeyKeyExchangeParameter.requestedSize.rawValue: 32, SecKeyKeyExchangeParameter.sharedInfo.rawValue: info,
        ]
        let derived = try #require(SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeStandardX963SHA256, theirs, parameters as CFDictionary, &error))
        let hex = { (data: Data) in data.map { String(format: "%02x", $0) }.joined() }
        let expected = try openssl([
            "kdf", "-keylen", "32", "-kdfopt", "digest:SHA256", "-kdfopt", "hexsecret:\(hex(shared))", "-kdfopt", "hexinfo:\(hex(info))", "-binary", "X963KDF",
        ])
        #expect(derived == expected)
        #expect(SecKeyCopyKeyExchangeResult(mine, .ecdhKeyExchangeStandardX963SHA256, theirs, [:] as CFDictionary, &error) == nil)
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecParam))
        #expect(SecKeyIsAlgorithmSupported(mine, .keyExchange, .ecdhKeyExchangeCofactorX963SHA256))
        #expect(!SecKeyIsAlgorithmSupported(theirs, .keyExchange, .ecdhKeyExchangeStandard), "a public key exchanges nothing")
    }

    @Test(
        "ECDSA over a digest the app made, as DER or as r || s: openssl verifies Keyferry's and signs digests Keyferry verifies; a digest of the wrong length is errSecParam",
        arguments: [256, 384])
    func digestSignatures(bits: Int) throws {
        let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits: bits)
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, nil))
        let publicPath = try file("ec.der", Data(Array(hex: Self.spkiPrefix[bits]!)) + point)
        let body = Data("a request body".utf8)
        let digest = try openssl(["dgst", "-sha256", "-binary", try file("body", body)])
        var error: Unmanaged<CFError>?
        for algorithm in [SecKeyAlgorithm.ecdsaSignatureDigestX962SHA256, .ecdsaSignatureDigestX962] {
            let signature = try #require(SecKeyCreateSignature(key, algorithm, digest, &error), "\(algorithm.rawValue)")
            // pkeyutl signs and verifies the bytes it is given, unhashed.
            try openssl([
                "pkeyutl", "-verify", "-pubin", "-keyform", "DER", "-inkey", publicPath, "-in", try file("digest", digest), "-sigfile",
                try file("sig", signature),
            ])
            #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, body, signature, &error))
        }
        let raw = try #require(SecKeyCreateSignature(key, .ecdsaSignatureDigestRFC4754SHA256, digest, &error))
        #expect(raw.count == 2 * ((bits + 7) / 8), "RFC 4754: r and s, each as long as the curve")
        #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageRFC4754SHA256, body, raw, &error))
        #expect(!SecKeyVerifySignature(publicKey, .ecdsaSignatureDigestRFC4754SHA256, Data(digest.reversed()), raw, &error))

        let curve = [256: "prime256v1", 384: "secp384r1"][bits]!
        try openssl(["ecparam", "-name", curve, "-genkey", "-noout", "-out", "theirs.pem"])
        let theirSPKI = try openssl(["pkey", "-in", "theirs.pem", "-pubout", "-outform", "DER"])
        let theirs = try #require(
            SecKeyCreateWithData(
                Data(theirSPKI.suffix(point.count)),
                [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary,
                &error))
        let theirSignature = try openssl(["pkeyutl", "-sign", "-inkey", "theirs.pem", "-in", try file("digest", digest)])
        #expect(SecKeyVerifySignature(theirs, .ecdsaSignatureDigestX962SHA256, digest, theirSignature, &error))

        #expect(SecKeyCreateSignature(key, .ecdsaSignatureDigestX962SHA384, digest, &error) == nil)
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecParam))
        #expect(SecKeyCreateSignature(key, .rsaSignatureDigestPKCS1v15SHA256, digest, &error) == nil)
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecUnimplemented))
    }

    /// Apple's ECIES with third-party primitives (Python's cryptography): ECDH, the X9.63 KDF
    /// with the ephemeral public key as shared info, AES-GCM with a 16-byte IV, and the layout
    /// `ephemeral public key || ciphertext || tag`, as `SecKey.h` documents it.
    static let eciesPeer = """
        import sys
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF
        mode, bits, digest, variable_iv, key_hex, data_hex = sys.argv[1:]
        curve = {"256": ec.SECP256R1(), "384": ec.SECP384R1(), "521": ec.SECP521R1()}[bits]
        point = (int(bits) + 7) // 8 * 2 + 1
        key_size = 16 if int(bits) <= 256 else 32
        def derive(secret, ephemeral):
            size = key_size + (16 if variable_iv == "1" else 0)
            out = X963KDF(algorithm=getattr(hashes, digest)(), length=size, sharedinfo=ephemeral).derive(secret)
            return out[:key_size], (out[key_size:] if variable_iv == "1" else bytes(16))
        key, data = bytes.fromhex(key_hex), bytes.fromhex(data_hex)
        if mode == "decrypt":  # key: the X9.63 private key (point || scalar)
            private = ec.derive_private_key(int.from_bytes(key[point:], "big"), curve)
            ephemeral = data[:point]
            peer = ec.EllipticCurvePublicKey.from_encoded_point(curve, ephemeral)
            aes_key, iv = derive(private.exchange(ec.ECDH(), peer), ephemeral)
            sys.stdout.write(AESGCM(aes_key).decrypt(iv, data[point:], None).hex())
        else:  # key: the recipient's X9.63 public key
            recipient = ec.EllipticCurvePublicKey.from_encoded_point(curve, key)
            mine = ec.generate_private_key(curve)
            ephemeral = mine.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
            aes_key, iv = derive(mine.exchange(ec.ECDH(), recipient), ephemeral)
            sys.stdout.write((ephemeral + AESGCM(aes_key).encrypt(iv, data, None)).hex())
        """

    func eciesPeer(_ mode: String, bits: Int, hash: String, variableIV: Bool, key: Data, data: Data) throws -> Data {
        let process = Process()
        process.executableURL = try OutsideReaders.python()
        let hex = { (data: Data) in data.map { String(format: "%02x", $0) }.joined() }
        process.arguments = ["-c", Self.eciesPeer, mode, "\(bits)", hash, variableIV ? "1" : "0", hex(key), hex(data)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "the ECIES peer failed to \(mode)")
        return Data(Array(hex: text))
    }

    @Test(
        "ECIES: Keyferry's ciphertexts are Apple's layout, which Python's cryptography opens, and Keyferry opens its; any changed byte is refused",
        arguments: [256, 384, 521])
    func ecies(bits: Int) throws {
        let key = try randomKey(kSecAttrKeyTypeECSECPrimeRandom, bits: bits)
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, nil))
        let privateRepresentation = try #require(SecKeyCopyExternalRepresentation(key, nil))
        let secret = Data("a token for the server, sealed to one device".utf8)
        let algorithms: [(SecKeyAlgorithm, String, Bool)] = [
            (.eciesEncryptionCofactorX963SHA256AESGCM, "SHA256", false), (.eciesEncryptionStandardX963SHA256AESGCM, "SHA256", false),
            (.eciesEncryptionStandardX963SHA1AESGCM, "SHA1", false), (.eciesEncryptionCofactorVariableIVX963SHA256AESGCM, "SHA256", true),
            (.eciesEncryptionStandardVariableIVX963SHA384AESGCM, "SHA384", true), (.eciesEncryptionCofactorX963SHA512AESGCM, "SHA512", false),
        ]
        var error: Unmanaged<CFError>?
        for (algorithm, hash, variableIV) in algorithms {
            #expect(SecKeyIsAlgorithmSupported(publicKey, .encrypt, algorithm) && SecKeyIsAlgorithmSupported(key, .decrypt, algorithm))
            #expect(!SecKeyIsAlgorithmSupported(key, .encrypt, algorithm) && !SecKeyIsAlgorithmSupported(publicKey, .decrypt, algorithm))
            let sealed = try #require(SecKeyCreateEncryptedData(publicKey, algorithm, secret, &error), "\(algorithm.rawValue)")
            #expect(sealed.count == point.count + secret.count + 16)
            #expect(try eciesPeer("decrypt", bits: bits, hash: hash, variableIV: variableIV, key: privateRepresentation, data: sealed) == secret)
            let theirs = try eciesPeer("encrypt", bits: bits, hash: hash, variableIV: variableIV, key: point, data: secret)
            #expect(SecKeyCreateDecryptedData(key, algorithm, theirs, &error) == secret, "\(algorithm.rawValue)")

            // As Apple's regression test: the tag, the ciphertext, the point's prefix and its X.
            for index in [sealed.count - 8, sealed.count - 20, 0, 1] {
                var broken = sealed
                broken[index] ^= 0xff
                #expect(SecKeyCreateDecryptedData(key, algorithm, broken, &error) == nil, "byte \(index) changed")
                #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecParam))
            }
        }
        #expect(SecKeyCreateDecryptedData(key, .eciesEncryptionCofactorX963SHA256AESGCM, point, &error) == nil, "shorter than a point and a tag")
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecParam))
        #expect(SecKeyCreateEncryptedData(key, .eciesEncryptionCofactorX963SHA256AESGCM, secret, &error) == nil, "a private key does not encrypt")
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecUnimplemented))
        #expect(!SecKeyIsAlgorithmSupported(publicKey, .encrypt, .eciesEncryptionStandardX963SHA224AESGCM), "no SHA-224 here")
    }

    @Test(
        "the Secure Enclave: P-256 only, the private key never handed out (errSecUnimplemented), its public key and signatures as any key's, found by its tag and token"
    )
    func secureEnclave() throws {
        let tag = Data("com.example.enclave".utf8)
        let access = try #require(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage], nil))
        let key = try randomKey(
            kSecAttrKeyTypeECSECPrimeRandom, bits: 256,
            [
                kSecAttrTokenID: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrApplicationTag: tag, kSecAttrAccessControl: access],
            ])
        var error: Unmanaged<CFError>?
        #expect(SecKeyCopyExternalRepresentation(key, &error) == nil)
        #expect(CFErrorGetCode(try #require(error?.takeRetainedValue())) == Int(errSecUnimplemented))
        let attributes = try #require(SecKeyCopyAttributes(key))
        #expect(attributes[kSecValueData] == nil && attributes[kSecAttrTokenID] as? String == kSecAttrTokenIDSecureEnclave)
        #expect(attributes[kSecAttrIsExtractable] as? Bool == false)

        // The public key leaves, and openssl checks what the enclave signed.
        let publicKey = try #require(SecKeyCopyPublicKey(key))
        let point = try #require(SecKeyCopyExternalRepresentation(publicKey, &error))
        let message = Data("login challenge".utf8)
        let signature = try #require(SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message, &error))
        let publicPath = try file("enclave.der", Data(Array(hex: Self.spkiPrefix[256]!)) + point)
        try openssl(["dgst", "-sha256", "-verify", publicPath, "-keyform", "DER", "-signature", try file("sig", signature), try file("msg", message)])

        // Found again by tag and by token; its item's data is a reference, never the key.
        var result: CFTypeRef?
        let query: [CFString: Any] = [kSecClass: kSecClassKey, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave, kSecAttrApplicationTag: tag, kSecReturnRef: true]
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecSuccess)
        let found = try #require(result as? SecKey)
        #expect(SecKeyCopyExternalRepresentation(found, nil) == nil)
        let again = try #require(SecKeyCreateSignature(found, .ecdsaSignatureMessageX962SHA256, message, &error))
        #expect(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message, again, &error))
        let asData: [CFString: Any] = [kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecReturnData: true]
        #expect(context.run { SecItemCopyMatching(asData as CFDictionary, &result) } == errSecSuccess)
        let reference = try #require(result as? Data)
        #expect(reference.starts(with: Data(kSecAttrTokenIDSecureEnclave.utf8)))
        #expect(reference.count < 97, "not the private key's 97 bytes")

        for (parameters, words) in [
            ([kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 2048, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave] as [CFString: Any], "P-256"),
            ([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 384, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave], "P-256"),
            (
                [
                    kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave,
                    kSecAttrSynchronizable: true,
                ],
                "synchronizable"
            ),
            ([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 256, kSecAttrTokenID: "com.example.token"], "the only token"),
        ] {
            #expect(context.run { SecKeyCreateRandomKey(parameters as CFDictionary, &error) } == nil)
            let failure = try #require(error?.takeRetainedValue())
            #expect(CFErrorGetCode(failure) == Int(errSecParam))
            #expect(failure.description.contains(words), "\(failure)")
        }
        let forged: [CFString: Any] = [kSecClass: kSecClassKey, kSecAttrTokenID: kSecAttrTokenIDSecureEnclave, kSecValueData: Data(count: 97)]
        #expect(context.run { SecItemAdd(forged as CFDictionary, nil) } == errSecParam, "a token item is made, not added")
    }

    @Test("a permanent key is stored as Apple stores it, found again by its tag as a SecKey, and used; bad parameters are refused by name")
    func permanentKey() throws {
        let tag = Data("com.example.signing".utf8)
        let key = try randomKey(
            kSecAttrKeyTypeECSECPrimeRandom, bits: 256,
            [kSecPrivateKeyAttrs: [kSecAttrIsPermanent: true, kSecAttrApplicationTag: tag, kSecAttrLabel: "signing key"]])
        var result: CFTypeRef?
        let query: [CFString: Any] = [kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecReturnRef: true]
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecSuccess)
        let found = try #require(result as? SecKey)
        #expect(found == key)
        let message = Data("m".utf8)
        let signature = try #require(SecKeyCreateSignature(found, .ecdsaSignatureMessageX962SHA256, message, nil))
        #expect(SecKeyVerifySignature(try #require(SecKeyCopyPublicKey(key)), .ecdsaSignatureMessageX962SHA256, message, signature, nil))

        var attributes: CFTypeRef?
        let asAttributes: [CFString: Any] = [kSecClass: kSecClassKey, kSecAttrApplicationTag: tag, kSecReturnAttributes: true, kSecReturnRef: true]
        #expect(context.run { SecItemCopyMatching(asAttributes as CFDictionary, &attributes) } == errSecSuccess)
        let dictionary = try #require(attributes as? [String: Any])
        #expect(dictionary[kSecAttrKeyClass as String] as? Int == 1)
        #expect(dictionary[kSecAttrKeyType as String] as? Int == 73)
        #expect(dictionary[kSecAttrLabel as String] as? String == "signing key")
        #expect(dictionary[kSecAttrApplicationLabel as String] as? Data == SecKeyCopyAttributes(key)?[kSecAttrApplicationLabel as String] as? Data)
        #expect(dictionary[kSecValueRef as String] is SecKey)
        #expect(dictionary[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked)

        // The key found by itself (kSecValueRef), and deleted so.
        #expect(context.run { SecItemDelete([kSecValueRef: key] as CFDictionary) } == errSecSuccess)
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecItemNotFound)
        // kSecValueRef adds a key made elsewhere.
        #expect(context.run { SecItemAdd([kSecValueRef: key, kSecAttrApplicationTag: tag] as CFDictionary, nil) } == errSecSuccess)
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecSuccess)

        var error: Unmanaged<CFError>?
        for (parameters, words) in [
            ([kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits: 300] as [CFString: Any], "256, 384 or 521"),
            ([kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 1000], "2048 to 4096"),
            ([kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: 3000], "steps of 128"),
            ([kSecAttrKeySizeInBits: 256], "kSecAttrKeyType is required"),
        ] {
            #expect(context.run { SecKeyCreateRandomKey(parameters as CFDictionary, &error) } == nil)
            let failure = try #require(error?.takeRetainedValue())
            #expect(CFErrorGetCode(failure) == Int(errSecParam))
            #expect(failure.description.contains(words), "\(failure)")
        }
        #expect(
            SecKeyCreateWithData(
                Data(count: 12), [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass: kSecAttrKeyClassPublic] as CFDictionary, &error) == nil)
    }
}

extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self = bytes
    }
}
