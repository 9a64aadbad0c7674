import Crypto
import Foundation
import KeychainModel
import _CryptoExtras

/// The key inside a `SecKey`: an elliptic-curve key on P-256, P-384 or P-521, or an RSA key,
/// private or public, with its operations. Representations are Apple's: an EC public key is its
/// ANSI X9.63 point (`04 || X || Y`), a private one the point and then the scalar; an RSA key is
/// its PKCS #1 DER.
enum KeyMaterial: Sendable {
    case p256(P256.Signing.PrivateKey)
    case p256Public(P256.Signing.PublicKey)
    case p384(P384.Signing.PrivateKey)
    case p384Public(P384.Signing.PublicKey)
    case p521(P521.Signing.PrivateKey)
    case p521Public(P521.Signing.PublicKey)
    case rsa(_RSA.Signing.PrivateKey)
    case rsaPublic(_RSA.Signing.PublicKey)

    enum Kind: Sendable { case ellipticCurve, rsa }

    /// A new private key; `bits` is the curve's size or the RSA modulus's.
    static func random(_ kind: Kind, bits: Int) throws(KeychainError) -> KeyMaterial {
        switch (kind, bits) {
        case (.ellipticCurve, 256): return .p256(P256.Signing.PrivateKey())
        case (.ellipticCurve, 384): return .p384(P384.Signing.PrivateKey())
        case (.ellipticCurve, 521): return .p521(P521.Signing.PrivateKey())
        case (.ellipticCurve, _):
            throw KeychainError(.param, "kSecAttrKeySizeInBits \(bits) is not a curve; EC keys are 256, 384 or 521 bits.")
        case (.rsa, _):
            // BoringSSL makes moduli in steps of 128 bits and rounds any other size down.
            guard (2048...4096).contains(bits), bits % 128 == 0 else {
                throw KeychainError(.param, "kSecAttrKeySizeInBits \(bits): RSA keys are 2048 to 4096 bits, in steps of 128 (2048, 3072, 4096 ...).")
            }
            do {
                return .rsa(try _RSA.Signing.PrivateKey(keySize: .init(bitCount: bits)))
            } catch {
                throw KeychainError(.internalError, "the RSA key could not be generated: \(error)")
            }
        }
    }

    /// A key from its external representation, as `SecKeyCreateWithData` reads it.
    init(_ kind: Kind, isPrivate: Bool, representation data: Data) throws(KeychainError) {
        do {
            switch (kind, isPrivate) {
            case (.ellipticCurve, false):
                switch data.count {
                case 65: self = .p256Public(try P256.Signing.PublicKey(x963Representation: data))
                case 97: self = .p384Public(try P384.Signing.PublicKey(x963Representation: data))
                case 133: self = .p521Public(try P521.Signing.PublicKey(x963Representation: data))
                default: throw KeychainError(.param, "\(data.count) bytes is no X9.63 public key of P-256, P-384 or P-521.")
                }
            case (.ellipticCurve, true):
                switch data.count {
                case 97: self = .p256(try P256.Signing.PrivateKey(x963Representation: data))
                case 145: self = .p384(try P384.Signing.PrivateKey(x963Representation: data))
                case 199: self = .p521(try P521.Signing.PrivateKey(x963Representation: data))
                default: throw KeychainError(.param, "\(data.count) bytes is no X9.63 private key of P-256, P-384 or P-521.")
                }
            case (.rsa, false): self = .rsaPublic(try _RSA.Signing.PublicKey(unsafeDERRepresentation: data))
            case (.rsa, true): self = .rsa(try _RSA.Signing.PrivateKey(unsafeDERRepresentation: data))
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "the data is not a \(kind == .rsa ? "PKCS #1 RSA" : "X9.63 EC") \(isPrivate ? "private" : "public") key: \(error)")
        }
    }

    /// A private key from its PKCS #8 (as a PKCS #12 file holds it): EC on one of the three
    /// curves, or RSA.
    init(pkcs8 der: Data) throws(KeychainError) {
        if let key = try? P256.Signing.PrivateKey(derRepresentation: der) {
            self = .p256(key)
        } else if let key = try? P384.Signing.PrivateKey(derRepresentation: der) {
            self = .p384(key)
        } else if let key = try? P521.Signing.PrivateKey(derRepresentation: der) {
            self = .p521(key)
        } else if let key = try? _RSA.Signing.PrivateKey(unsafeDERRepresentation: der) {
            self = .rsa(key)
        } else {
            throw KeychainError(.unimplemented, "the private key is not an EC key on P-256, P-384 or P-521, nor an RSA key.")
        }
    }

    var kind: Kind {
        switch self {
        case .rsa, .rsaPublic: .rsa
        default: .ellipticCurve
        }
    }

    var isPrivate: Bool {
        switch self {
        case .p256, .p384, .p521, .rsa: true
        default: false
        }
    }

    var bits: Int {
        switch self {
        case .p256, .p256Public: 256
        case .p384, .p384Public: 384
        case .p521, .p521Public: 521
        case .rsa(let key): key.keySizeInBits
        case .rsaPublic(let key): key.keySizeInBits
        }
    }

    var publicKey: KeyMaterial {
        switch self {
        case .p256(let key): .p256Public(key.publicKey)
        case .p384(let key): .p384Public(key.publicKey)
        case .p521(let key): .p521Public(key.publicKey)
        case .rsa(let key): .rsaPublic(key.publicKey)
        default: self
        }
    }

    var externalRepresentation: Data {
        switch self {
        case .p256(let key): key.x963Representation
        case .p256Public(let key): key.x963Representation
        case .p384(let key): key.x963Representation
        case .p384Public(let key): key.x963Representation
        case .p521(let key): key.x963Representation
        case .p521Public(let key): key.x963Representation
        case .rsa(let key): key.derRepresentation
        case .rsaPublic(let key): key.pkcs1DERRepresentation
        }
    }

    var publicKeyPEM: String {
        switch publicKey {
        case .p256Public(let key): key.pemRepresentation
        case .p384Public(let key): key.pemRepresentation
        case .p521Public(let key): key.pemRepresentation
        case .rsaPublic(let key): key.pemRepresentation
        default: ""
        }
    }

    /// `kSecAttrApplicationLabel` as Apple sets it: the SHA-1 of the public key's representation.
    var applicationLabel: Data { Data(Insecure.SHA1.hash(data: publicKey.externalRepresentation)) }

    // MARK: Operations

    func sign(_ input: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        guard isPrivate, let operation = algorithm.operation else { throw unsupported(algorithm, .sign) }
        do {
            switch (self, operation) {
            case (.p256(let key), .ecdsa(let signed, let raw)):
                return Self.encoded(try key.signature(for: try Digests.input(input, signed, algorithm)), raw: raw)
            case (.p384(let key), .ecdsa(let signed, let raw)):
                return Self.encoded(try key.signature(for: try Digests.input(input, signed, algorithm)), raw: raw)
            case (.p521(let key), .ecdsa(let signed, let raw)):
                return Self.encoded(try key.signature(for: try Digests.input(input, signed, algorithm)), raw: raw)
            case (.rsa(let key), .rsaSignature(let padding, let hash)):
                return try key.signature(for: Digests.of(input, hash), padding: padding).rawRepresentation
            default: throw unsupported(algorithm, .sign)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "signing with \(algorithm.rawValue) failed: \(error)")
        }
    }

    func verify(_ signature: Data, of input: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Bool {
        guard let operation = algorithm.operation else { throw unsupported(algorithm, .verify) }
        switch (publicKey, operation) {
        case (.p256Public(let key), .ecdsa(let signed, let raw)):
            let digest = try Digests.input(input, signed, algorithm)
            guard let signature = try? raw ? P256.Signing.ECDSASignature(rawRepresentation: signature) : .init(derRepresentation: signature) else {
                return false
            }
            return key.isValidSignature(signature, for: digest)
        case (.p384Public(let key), .ecdsa(let signed, let raw)):
            let digest = try Digests.input(input, signed, algorithm)
            guard let signature = try? raw ? P384.Signing.ECDSASignature(rawRepresentation: signature) : .init(derRepresentation: signature) else {
                return false
            }
            return key.isValidSignature(signature, for: digest)
        case (.p521Public(let key), .ecdsa(let signed, let raw)):
            let digest = try Digests.input(input, signed, algorithm)
            guard let signature = try? raw ? P521.Signing.ECDSASignature(rawRepresentation: signature) : .init(derRepresentation: signature) else {
                return false
            }
            return key.isValidSignature(signature, for: digest)
        case (.rsaPublic(let key), .rsaSignature(let padding, let hash)):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: Digests.of(input, hash), padding: padding)
        default: throw unsupported(algorithm, .verify)
        }
    }

    /// Encryption is a public key's, as on Apple's platforms: a private key says the algorithm is
    /// not supported.
    func encrypt(_ plaintext: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        switch (self, algorithm.operation) {
        case (.rsaPublic(let key), .rsaEncryption(let padding)):
            do {
                return try _RSA.Encryption.PublicKey(unsafeDERRepresentation: key.derRepresentation).encrypt(plaintext, padding: padding)
            } catch {
                throw KeychainError(.param, "\(plaintext.count) bytes cannot be encrypted with \(algorithm.rawValue) under a \(bits)-bit key.")
            }
        case (_, .ecies(let hash, let variableIV)) where !isPrivate && kind == .ellipticCurve:
            let ephemeral = try KeyMaterial.random(.ellipticCurve, bits: bits)
            let ephemeralPublicKey = ephemeral.publicKey.externalRepresentation
            let secret = try ephemeral.sharedSecret(with: self)
            let (key, nonce) = try eciesKey(secret, hash, ephemeralPublicKey: ephemeralPublicKey, variableIV: variableIV)
            do {
                let sealed = try AES.GCM.seal(plaintext, using: key, nonce: nonce)
                return ephemeralPublicKey + sealed.ciphertext + sealed.tag
            } catch {
                throw KeychainError(.param, "ECIES: AES-GCM could not encrypt the data: \(error)")
            }
        default:
            throw unsupported(algorithm, .encrypt)
        }
    }

    func decrypt(_ ciphertext: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        switch (self, algorithm.operation) {
        case (.rsa(let key), .rsaEncryption(let padding)):
            do {
                return try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: key.derRepresentation).decrypt(ciphertext, padding: padding)
            } catch {
                throw KeychainError(.decode, "the ciphertext does not decrypt with \(algorithm.rawValue) under this key.")
            }
        case (_, .ecies(let hash, let variableIV)) where isPrivate && kind == .ellipticCurve:
            let pointSize = publicKey.externalRepresentation.count
            guard ciphertext.count >= pointSize + 16 else {
                throw KeychainError(.param, "ECIES: \(ciphertext.count) bytes is too short for a ciphertext under a \(bits)-bit key.")
            }
            let ephemeralPublicKey = Data(ciphertext.prefix(pointSize))
            let secret = try sharedSecret(with: try KeyMaterial(.ellipticCurve, isPrivate: false, representation: ephemeralPublicKey))
            let (key, nonce) = try eciesKey(secret, hash, ephemeralPublicKey: ephemeralPublicKey, variableIV: variableIV)
            do {
                let body = ciphertext.dropFirst(pointSize)
                let box = try AES.GCM.SealedBox(nonce: nonce, ciphertext: body.dropLast(16), tag: body.suffix(16))
                return try AES.GCM.open(box, using: key)
            } catch {
                throw KeychainError(.param, "ECIES: the ciphertext does not decrypt with \(algorithm.rawValue) under this key.")
            }
        default:
            throw unsupported(algorithm, .decrypt)
        }
    }

    /// ECDH with `peer`'s public key: the shared X coordinate, or with an X9.63 KDF `size` bytes
    /// of it, with `sharedInfo`.
    func exchange(with peer: KeyMaterial, _ algorithm: SecKeyAlgorithm, size: Int?, sharedInfo: Data) throws(KeychainError) -> Data {
        guard isPrivate, case .keyExchange(let kdf) = algorithm.operation else { throw unsupported(algorithm, .keyExchange) }
        let secret = try sharedSecret(with: peer)
        guard let kdf else { return secret.withUnsafeBytes { Data($0) } }
        guard let size, size > 0 else {
            throw KeychainError(.param, "\(algorithm.rawValue) needs kSecKeyKeyExchangeParameterRequestedSize, a positive byte count.")
        }
        return Digests.x963(secret, kdf, sharedInfo: sharedInfo, size: size)
    }

    /// The ECDH secret of this private key and `peer`'s public key.
    private func sharedSecret(with peer: KeyMaterial) throws(KeychainError) -> SharedSecret {
        do {
            switch (self, peer.publicKey) {
            case (.p256(let mine), .p256Public(let theirs)):
                return try P256.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P256.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p384(let mine), .p384Public(let theirs)):
                return try P384.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P384.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p521(let mine), .p521Public(let theirs)):
                return try P521.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P521.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            default:
                throw KeychainError(.param, "key exchange needs a private EC key and a public key on the same curve.")
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "the key exchange failed: \(error)")
        }
    }

    /// ECIES's AES key and IV, as `SecKeyAdaptors.m` derives them: the X9.63 KDF of the shared
    /// secret with the ephemeral public key as shared info, 16 key bytes for curves up to 256
    /// bits and 32 above; then 16 more for the IV, or an all-zero IV.
    private func eciesKey(
        _ secret: SharedSecret, _ hash: Digests.Hash, ephemeralPublicKey: Data, variableIV: Bool
    ) throws(KeychainError) -> (SymmetricKey, AES.GCM.Nonce) {
        let keySize = bits > 256 ? 32 : 16
        let derived = Digests.x963(secret, hash, sharedInfo: ephemeralPublicKey, size: keySize + (variableIV ? 16 : 0))
        do {
            let nonce = try AES.GCM.Nonce(data: variableIV ? Data(derived.suffix(16)) : Data(count: 16))
            return (SymmetricKey(data: derived.prefix(keySize)), nonce)
        } catch {
            throw KeychainError(.internalError, "ECIES: the IV was refused: \(error)")
        }
    }

    private static func encoded(_ signature: P256.Signing.ECDSASignature, raw: Bool) -> Data {
        raw ? signature.rawRepresentation : signature.derRepresentation
    }

    private static func encoded(_ signature: P384.Signing.ECDSASignature, raw: Bool) -> Data {
        raw ? signature.rawRepresentation : signature.derRepresentation
    }

    private static func encoded(_ signature: P521.Signing.ECDSASignature, raw: Bool) -> Data {
        raw ? signature.rawRepresentation : signature.derRepresentation
    }

    func supports(_ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
        switch (operation, algorithm.operation, kind) {
        case (.sign, .ecdsa, .ellipticCurve), (.sign, .rsaSignature, .rsa): isPrivate
        case (.verify, .ecdsa, .ellipticCurve), (.verify, .rsaSignature, .rsa): true
        case (.encrypt, .rsaEncryption, .rsa), (.encrypt, .ecies, .ellipticCurve): !isPrivate
        case (.decrypt, .rsaEncryption, .rsa), (.decrypt, .ecies, .ellipticCurve): isPrivate
        case (.keyExchange, .keyExchange, .ellipticCurve): isPrivate
        default: false
        }
    }

    private func unsupported(_ algorithm: SecKeyAlgorithm, _ operation: SecKeyOperationType) -> KeychainError {
        let key = "\(isPrivate ? "private" : "public") \(kind == .rsa ? "RSA" : "EC") key"
        return KeychainError(.unimplemented, "\(algorithm.rawValue) is not supported for \(operation.name) with a \(key) in Keyferry.")
    }
}

/// The hash functions the algorithms name: of a message, of a digest the caller made, and in
/// the X9.63 KDF.
enum Digests {
    enum Hash: Sendable {
        case sha1, sha256, sha384, sha512

        /// Apple's spelling in an algorithm's raw value; nil for one Keyferry has not (SHA-224, MD5).
        init?(name: String) {
            switch name {
            case "SHA1": self = .sha1
            case "SHA256": self = .sha256
            case "SHA384": self = .sha384
            case "SHA512": self = .sha512
            default: return nil
            }
        }

        var byteCount: Int {
            switch self {
            case .sha1: Insecure.SHA1.byteCount
            case .sha256: SHA256.byteCount
            case .sha384: SHA384.byteCount
            case .sha512: SHA512.byteCount
            }
        }
    }

    static func of(_ message: Data, _ hash: Hash) -> any Digest {
        switch hash {
        case .sha1: Insecure.SHA1.hash(data: message)
        case .sha256: SHA256.hash(data: message)
        case .sha384: SHA384.hash(data: message)
        case .sha512: SHA512.hash(data: message)
        }
    }

    /// What an ECDSA signature covers: the message's hash, or the caller's digest, which must be
    /// as long as the hash the algorithm names (errSecParam otherwise, as Apple).
    static func input(_ input: Data, _ signed: SecKeyAlgorithm.SignedInput, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> any Digest {
        switch signed {
        case .message(let hash): return of(input, hash)
        case .digest(let hash):
            if let hash, input.count != hash.byteCount {
                throw KeychainError(.param, "\(algorithm.rawValue) signs a \(hash.byteCount)-byte digest; \(input.count) bytes were given.")
            }
            guard !input.isEmpty else { throw KeychainError(.param, "\(algorithm.rawValue) was given an empty digest.") }
            return CallerDigest(bytes: input)
        }
    }

    static func x963(_ secret: SharedSecret, _ hash: Hash, sharedInfo: Data, size: Int) -> Data {
        let key =
            switch hash {
            case .sha1: secret.x963DerivedSymmetricKey(using: Insecure.SHA1.self, sharedInfo: sharedInfo, outputByteCount: size)
            case .sha256: secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: sharedInfo, outputByteCount: size)
            case .sha384: secret.x963DerivedSymmetricKey(using: SHA384.self, sharedInfo: sharedInfo, outputByteCount: size)
            case .sha512: secret.x963DerivedSymmetricKey(using: SHA512.self, sharedInfo: sharedInfo, outputByteCount: size)
            }
        return key.withUnsafeBytes { Data($0) }
    }
}

/// A digest the caller computed, signed as given: ECDSA reads only its bytes.
private struct CallerDigest: Digest {
    static var byteCount: Int { 0 }
    let bytes: [UInt8]

    init(bytes: Data) { self.bytes = Array(bytes) }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try bytes.withUnsafeBytes(body) }
    func makeIterator() -> IndexingIterator<[UInt8]> { bytes.makeIterator() }
    var description: String { "digest of \(bytes.count) bytes" }
}
