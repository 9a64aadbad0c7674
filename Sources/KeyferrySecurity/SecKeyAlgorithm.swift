import Foundation
import _CryptoExtras

/// An algorithm of `SecKeyCreateSignature`, `SecKeyCreateEncryptedData` and the rest, with
/// Apple's names and raw values (`SecKey.m`). Every one of Apple's is declared, so code names
/// them as it does there; `SecKeyIsAlgorithmSupported` says which Keyferry runs: ECDSA and RSA
/// signatures over a message hashed with SHA-256, SHA-384 or SHA-512, and RSA OAEP encryption.
public struct SecKeyAlgorithm: RawRepresentable, Hashable, Sendable {
    public let rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }
    init(_ rawValue: CFString) { self.rawValue = rawValue }

    public static let ecdsaSignatureMessageX962SHA1 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA1")
    public static let ecdsaSignatureMessageX962SHA224 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA224")
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA256")
    public static let ecdsaSignatureMessageX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA384")
    public static let ecdsaSignatureMessageX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:message-X962:SHA512")
    public static let ecdsaSignatureDigestX962 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962")
    public static let ecdsaSignatureDigestX962SHA256 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA256")
    public static let ecdsaSignatureDigestX962SHA384 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA384")
    public static let ecdsaSignatureDigestX962SHA512 = SecKeyAlgorithm("algid:sign:ECDSA:digest-X962:SHA512")

    public static let rsaSignatureMessagePKCS1v15SHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA1")
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA384")
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PKCS1v15:SHA512")
    public static let rsaSignatureDigestPKCS1v15SHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePSSSHA1 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA1")
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA256")
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA384")
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm("algid:sign:RSA:message-PSS:SHA512")
    public static let rsaSignatureDigestPSSSHA256 = SecKeyAlgorithm("algid:sign:RSA:digest-PSS:SHA256")

    public static let rsaEncryptionRaw = SecKeyAlgorithm("algid:encrypt:RSA:raw")
    public static let rsaEncryptionPKCS1 = SecKeyAlgorithm("algid:encrypt:RSA:PKCS1")
    public static let rsaEncryptionOAEPSHA1 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA1")
    public static let rsaEncryptionOAEPSHA256 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256")
    public static let rsaEncryptionOAEPSHA384 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA384")
    public static let rsaEncryptionOAEPSHA512 = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA512")
    public static let rsaEncryptionOAEPSHA256AESGCM = SecKeyAlgorithm("algid:encrypt:RSA:OAEP:SHA256:AESGCM")

    public static let eciesEncryptionStandardX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionCofactorX963SHA256AESGCM = SecKeyAlgorithm("algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM")
    public static let eciesEncryptionStandardVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDH:KDFX963:SHA256:AESGCM-KDFIV")
    public static let eciesEncryptionCofactorVariableIVX963SHA256AESGCM = SecKeyAlgorithm(
        "algid:encrypt:ECIES:ECDHC:KDFX963:SHA256:AESGCM-KDFIV")

    public static let ecdhKeyExchangeStandard = SecKeyAlgorithm("algid:keyexchange:ECDH")
    public static let ecdhKeyExchangeStandardX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDH:KDFX963:SHA256")
    public static let ecdhKeyExchangeCofactor = SecKeyAlgorithm("algid:keyexchange:ECDHC")
    public static let ecdhKeyExchangeCofactorX963SHA256 = SecKeyAlgorithm("algid:keyexchange:ECDHC:KDFX963:SHA256")

    /// A signature Keyferry makes and checks: the curve's ECDSA, or RSA with its padding.
    enum Signature {
        case ecdsa(Digests.Hash)
        case rsa(_RSA.Signing.Padding, Digests.Hash)
    }

    var signature: Signature? {
        switch self {
        case .ecdsaSignatureMessageX962SHA256: .ecdsa(.sha256)
        case .ecdsaSignatureMessageX962SHA384: .ecdsa(.sha384)
        case .ecdsaSignatureMessageX962SHA512: .ecdsa(.sha512)
        case .rsaSignatureMessagePKCS1v15SHA256: .rsa(.insecurePKCS1v1_5, .sha256)
        case .rsaSignatureMessagePKCS1v15SHA384: .rsa(.insecurePKCS1v1_5, .sha384)
        case .rsaSignatureMessagePKCS1v15SHA512: .rsa(.insecurePKCS1v1_5, .sha512)
        // swift-crypto's PSS salt is the digest's length, as Apple's.
        case .rsaSignatureMessagePSSSHA256: .rsa(.PSS, .sha256)
        case .rsaSignatureMessagePSSSHA384: .rsa(.PSS, .sha384)
        case .rsaSignatureMessagePSSSHA512: .rsa(.PSS, .sha512)
        default: nil
        }
    }

    enum KeyDerivation { case raw, x963SHA256 }

    var keyExchange: KeyDerivation? {
        switch self {
        case .ecdhKeyExchangeStandard, .ecdhKeyExchangeCofactor: .raw
        case .ecdhKeyExchangeStandardX963SHA256, .ecdhKeyExchangeCofactorX963SHA256: .x963SHA256
        default: nil
        }
    }

    var rsaEncryption: _RSA.Encryption.Padding? {
        switch self {
        case .rsaEncryptionOAEPSHA1: .PKCS1_OAEP
        case .rsaEncryptionOAEPSHA256: .PKCS1_OAEP_SHA256
        default: nil
        }
    }
}

/// The keys of `SecKeyCopyKeyExchangeResult`'s parameters, as Swift names them on Apple's
/// platforms: `SecKeyKeyExchangeParameter.requestedSize.rawValue`.
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, Sendable {
    public let rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }

    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: kSecKeyKeyExchangeParameterRequestedSize)
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: kSecKeyKeyExchangeParameterSharedInfo)
}
