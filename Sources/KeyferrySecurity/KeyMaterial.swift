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

    func sign(_ message: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        do {
            switch (self, algorithm.signature) {
            case (.p256(let key), .ecdsa(let hash)): return try key.signature(for: Digests.of(message, hash)).derRepresentation
            case (.p384(let key), .ecdsa(let hash)): return try key.signature(for: Digests.of(message, hash)).derRepresentation
            case (.p521(let key), .ecdsa(let hash)): return try key.signature(for: Digests.of(message, hash)).derRepresentation
            case (.rsa(let key), .rsa(let padding, let hash)): return try key.signature(for: Digests.of(message, hash), padding: padding).rawRepresentation
            default: throw unsupported(algorithm, .sign)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "signing with \(algorithm.rawValue) failed: \(error)")
        }
    }

    func verify(_ signature: Data, of message: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Bool {
        let key = publicKey
        switch (key, algorithm.signature) {
        case (.p256Public(let key), .ecdsa(let hash)):
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: Digests.of(message, hash))
        case (.p384Public(let key), .ecdsa(let hash)):
            guard let signature = try? P384.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: Digests.of(message, hash))
        case (.p521Public(let key), .ecdsa(let hash)):
            guard let signature = try? P521.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: Digests.of(message, hash))
        case (.rsaPublic(let key), .rsa(let padding, let hash)):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: Digests.of(message, hash), padding: padding)
        default: throw unsupported(algorithm, .verify)
        }
    }

    func encrypt(_ plaintext: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        guard case .rsaPublic(let key) = publicKey, let padding = algorithm.rsaEncryption else { throw unsupported(algorithm, .encrypt) }
        do {
            return try _RSA.Encryption.PublicKey(unsafeDERRepresentation: key.derRepresentation).encrypt(plaintext, padding: padding)
        } catch {
            throw KeychainError(.param, "\(plaintext.count) bytes cannot be encrypted with \(algorithm.rawValue) under a \(bits)-bit key.")
        }
    }

    func decrypt(_ ciphertext: Data, _ algorithm: SecKeyAlgorithm) throws(KeychainError) -> Data {
        guard case .rsa(let key) = self, let padding = algorithm.rsaEncryption else { throw unsupported(algorithm, .decrypt) }
        do {
            return try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: key.derRepresentation).decrypt(ciphertext, padding: padding)
        } catch {
            throw KeychainError(.decode, "the ciphertext does not decrypt with \(algorithm.rawValue) under this key.")
        }
    }

    /// ECDH with `peer`'s public key: the shared X coordinate, or with an X9.63 KDF over SHA-256
    /// `size` bytes of it, with `sharedInfo`. On these curves (cofactor 1) the cofactor variant is
    /// the same computation.
    func exchange(with peer: KeyMaterial, _ algorithm: SecKeyAlgorithm, size: Int?, sharedInfo: Data) throws(KeychainError) -> Data {
        guard let derivation = algorithm.keyExchange else { throw unsupported(algorithm, .keyExchange) }
        let secret: SharedSecret
        do {
            switch (self, peer) {
            case (.p256(let mine), .p256Public(let theirs)):
                secret = try P256.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P256.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p384(let mine), .p384Public(let theirs)):
                secret = try P384.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P384.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            case (.p521(let mine), .p521Public(let theirs)):
                secret = try P521.KeyAgreement.PrivateKey(rawRepresentation: mine.rawRepresentation)
                    .sharedSecretFromKeyAgreement(with: try P521.KeyAgreement.PublicKey(rawRepresentation: theirs.rawRepresentation))
            default:
                throw KeychainError(.param, "key exchange needs a private EC key and a public key on the same curve.")
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.param, "the key exchange failed: \(error)")
        }
        switch derivation {
        case .raw:
            return secret.withUnsafeBytes { Data($0) }
        case .x963SHA256:
            guard let size, size > 0 else {
                throw KeychainError(.param, "\(algorithm.rawValue) needs kSecKeyKeyExchangeParameterRequestedSize, a positive byte count.")
            }
            return secret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: sharedInfo, outputByteCount: size).withUnsafeBytes { Data($0) }
        }
    }

    func supports(_ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
        switch operation {
        case .sign, .verify:
            guard operation == .verify || isPrivate, let signature = algorithm.signature else { return false }
            switch (kind, signature) {
            case (.ellipticCurve, .ecdsa), (.rsa, .rsa): return true
            default: return false
            }
        case .encrypt: return kind == .rsa && algorithm.rsaEncryption != nil
        case .decrypt: return kind == .rsa && isPrivate && algorithm.rsaEncryption != nil
        case .keyExchange: return kind == .ellipticCurve && isPrivate && algorithm.keyExchange != nil
        }
    }

    private func unsupported(_ algorithm: SecKeyAlgorithm, _ operation: SecKeyOperationType) -> KeychainError {
        let key = "\(isPrivate ? "private" : "public") \(kind == .rsa ? "RSA" : "EC") key"
        return KeychainError(.unimplemented, "\(algorithm.rawValue) is not supported for \(operation.name) with a \(key) in Keyferry.")
    }
}

/// The hash functions the algorithms name, applied to a message.
enum Digests {
    enum Hash: Sendable { case sha256, sha384, sha512 }

    static func of(_ message: Data, _ hash: Hash) -> any Digest {
        switch hash {
        case .sha256: SHA256.hash(data: message)
        case .sha384: SHA384.hash(data: message)
        case .sha512: SHA512.hash(data: message)
        }
    }
}
