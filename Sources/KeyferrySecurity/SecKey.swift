public import Foundation
package import KeychainModel

/// A key, as `SecKeyCreateRandomKey`, `SecKeyCreateWithData` and `kSecReturnRef` hand it back.
public final class SecKey: Hashable, Sendable, CustomStringConvertible {
    let material: KeyMaterial
    /// The attributes given when it was made or read from the keychain: tag, label, permanence.
    let attributes: Attributes

    init(_ material: KeyMaterial, attributes: Attributes = [:]) {
        self.material = material
        self.attributes = attributes
    }

    public static func == (lhs: SecKey, rhs: SecKey) -> Bool {
        lhs.material.isPrivate == rhs.material.isPrivate && lhs.material.externalRepresentation == rhs.material.externalRepresentation
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(material.externalRepresentation) }

    public var description: String {
        let place = isInSecureEnclave ? ", in the Secure Enclave" : ""
        return "<SecKey \(material.kind == .rsa ? "RSA" : "EC") \(material.bits) bits, \(material.isPrivate ? "private" : "public")\(place)>"
    }

    /// A private key made with `kSecAttrTokenIDSecureEnclave`: its private part is never handed
    /// out, and its item is in no backup, transfer or sync.
    var isInSecureEnclave: Bool { material.isPrivate && attributes[.tokenID] != nil }

    /// The keys-class attributes Apple's keychain keeps for this key.
    var itemAttributes: Attributes {
        var out = attributes
        out[.keyClass] = .number(material.isPrivate ? 1 : 0)
        out[.type] = .number(material.kind == .rsa ? 42 : 73)
        out[.keySizeInBits] = .number(Int64(material.bits))
        out[.effectiveKeySize] = .number(Int64(material.bits))
        out[.applicationLabel] = out[.applicationLabel] ?? .data(material.applicationLabel)
        let isPrivate = material.isPrivate
        out[.canSign] = .bool(isPrivate)
        out[.canDecrypt] = .bool(isPrivate && material.kind == .rsa)
        out[.canUnwrap] = .bool(isPrivate && material.kind == .rsa)
        out[.canDerive] = .bool(isPrivate && material.kind == .ellipticCurve)
        out[.canVerify] = .bool(!isPrivate)
        out[.canEncrypt] = .bool(!isPrivate && material.kind == .rsa)
        out[.canWrap] = .bool(!isPrivate && material.kind == .rsa)
        out[.isExtractable] = .bool(!isInSecureEnclave)
        out[.isSensitive] = .bool(isInSecureEnclave)
        return out
    }

    /// A new private key for tools: `keyferry key create` makes one and adds `newItem` through a
    /// node. `rsa` picks RSA, else an EC key on the curve of `bits`.
    package static func random(rsa: Bool, bits: Int, attributes: Attributes) throws(KeychainError) -> SecKey {
        SecKey(try KeyMaterial.random(rsa ? .rsa : .ellipticCurve, bits: bits), attributes: attributes)
    }

    /// The keys-class item that keeps this key: its attributes as Apple's keychain sets them,
    /// its external representation as the data.
    package var newItem: NewItem {
        NewItem(.key, attributes: itemAttributes, data: material.externalRepresentation)
    }

    /// The public key as openssl and most servers take it: a SubjectPublicKeyInfo in PEM.
    package var publicKeyPEM: String { material.publicKeyPEM }

    /// What `kSecReturnData` gives for the item of a Secure Enclave key: as Apple gives the
    /// token's object ID, an opaque reference (the token and the application label), never the key.
    static func tokenReference(_ record: ItemRecord) -> Data? {
        guard case .string(let token) = record.attributes[.tokenID] else { return nil }
        guard case .data(let label) = record.attributes[.applicationLabel] else { return Data(token.utf8) }
        return Data(token.utf8) + label
    }

    /// The key an item of the keys class holds: its data is the external representation.
    convenience init(record: ItemRecord) throws(KeychainError) {
        let type = record.attributes[.type]
        let kind: KeyMaterial.Kind
        switch type {
        case .number(42): kind = .rsa
        case .number(73): kind = .ellipticCurve
        default:
            throw KeychainError(
                .unimplemented, "the key item has kSecAttrKeyType \(type?.description ?? "none"), not RSA or EC; Keyferry makes no SecKey of it.")
        }
        guard let data = record.data else { throw KeychainError(.internalError, "the key item was read without its data.") }
        self.init(try KeyMaterial(kind, isPrivate: record.attributes[.keyClass] != .number(0), representation: data), attributes: record.attributes)
    }
}

/// What `SecKeyIsAlgorithmSupported` asks about.
public enum SecKeyOperationType: Int, Sendable {
    case sign = 0, verify = 1, encrypt = 2, decrypt = 3, keyExchange = 4

    var name: String {
        switch self {
        case .sign: "signing"
        case .verify: "verifying"
        case .encrypt: "encryption"
        case .decrypt: "decryption"
        case .keyExchange: "key exchange"
        }
    }
}

// MARK: Making keys

/// A new key pair; the private key is returned. With `kSecAttrIsPermanent` (at the top or in
/// `kSecPrivateKeyAttrs`) the private key is also stored as a keys-class item of the current
/// app, with `kSecAttrApplicationTag`, `kSecAttrLabel`, `kSecAttrAccessible` or
/// `kSecAttrAccessControl` from the dictionaries, and `kSecAttrApplicationLabel` set as Apple
/// sets it; the public key is stored too when `kSecPublicKeyAttrs` says so.
public func SecKeyCreateRandomKey(_ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    keyOperation(error) { () throws(KeychainError) -> SecKey in
        let top = try SecDictionary.strings(parameters)
        let kind = try KeyParameters.kind(top)
        guard let size = top[kSecAttrKeySizeInBits] else { throw KeychainError(.param, "kSecAttrKeySizeInBits is required.") }
        let bits = Int(try Convert.number(size, kSecAttrKeySizeInBits))
        let inSecureEnclave = try KeyParameters.isSecureEnclave(top, kind: kind, bits: bits)
        let material = try KeyMaterial.random(kind, bits: bits)
        let privateAttributes = try KeyParameters.nested(top, kSecPrivateKeyAttrs)
        let publicAttributes = try KeyParameters.nested(top, kSecPublicKeyAttrs)
        var attributes = try KeyParameters.attributes(top.merging(privateAttributes) { $1 })
        if inSecureEnclave { attributes[.tokenID] = .string(NeverExported.secureEnclaveToken) }
        let key = SecKey(material, attributes: attributes)
        if try KeyParameters.isPermanent(privateAttributes, default: KeyParameters.isPermanent(top, default: false)) {
            try KeyParameters.store(key, top.merging(privateAttributes) { $1 })
        }
        if try KeyParameters.isPermanent(publicAttributes, default: false) {
            let publicKey = SecKey(material.publicKey, attributes: try KeyParameters.attributes(publicAttributes))
            try KeyParameters.store(publicKey, publicAttributes)
        }
        return key
    }
}

/// A key from its external representation: `kSecAttrKeyType` and `kSecAttrKeyClass` say which.
public func SecKeyCreateWithData(_ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    keyOperation(error) { () throws(KeychainError) -> SecKey in
        let strings = try SecDictionary.strings(attributes)
        guard let keyClass = strings[kSecAttrKeyClass] else { throw KeychainError(.param, "kSecAttrKeyClass is required.") }
        let isPrivate: Bool
        switch try Convert.number(keyClass, kSecAttrKeyClass) {
        case 0: isPrivate = false
        case 1: isPrivate = true
        default: throw KeychainError(.param, "kSecAttrKeyClass must be kSecAttrKeyClassPublic or kSecAttrKeyClassPrivate.")
        }
        let material = try KeyMaterial(try KeyParameters.kind(strings), isPrivate: isPrivate, representation: keyData)
        if let size = strings[kSecAttrKeySizeInBits], try Convert.number(size, kSecAttrKeySizeInBits) != material.bits {
            throw KeychainError(.param, "kSecAttrKeySizeInBits says \(size) but the key has \(material.bits) bits.")
        }
        return SecKey(material, attributes: try KeyParameters.attributes(strings))
    }
}

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    SecKey(key.material.publicKey)
}

/// The key's bytes; for a private key in the Secure Enclave, nil with errSecUnimplemented, as
/// on a device (`SecKey.m`: "export not implemented for key").
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    keyOperation(error) { () throws(KeychainError) -> Data in
        guard !key.isInSecureEnclave else {
            throw KeychainError(.unimplemented, "export not implemented for key \(key): a Secure Enclave key never leaves it.")
        }
        return key.material.externalRepresentation
    }
}

/// The key's attributes as `kSecReturnAttributes` would show its item, with `kSecValueData`
/// unless the key is in the Secure Enclave.
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    var record = SecDictionary.attributeValues(key.itemAttributes)
    record[kSecClass] = kSecClassKey
    record[kSecAttrKeyType] = key.material.kind == .rsa ? kSecAttrKeyTypeRSA : kSecAttrKeyTypeECSECPrimeRandom
    if !key.isInSecureEnclave { record[kSecValueData] = key.material.externalRepresentation }
    return record
}

/// The block size in bytes: the modulus of an RSA key, the signature's upper bound for EC.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    switch key.material.kind {
    case .rsa: key.material.bits / 8
    case .ellipticCurve: 2 * ((key.material.bits + 7) / 8) + 9
    }
}

// MARK: Operations

public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
    key.material.supports(operation, algorithm)
}

public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    keyOperation(error) { () throws(KeychainError) -> Data in
        guard key.material.isPrivate else { throw KeychainError(.param, "a public key cannot sign.") }
        return try key.material.sign(dataToSign, algorithm)
    }
}

/// false with `error` set both for a signature that does not verify (errSecVerifyFailed, as
/// Apple) and for an algorithm the key cannot use.
public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    keyOperation(error) { () throws(KeychainError) -> Bool in
        guard try key.material.verify(signature, of: signedData, algorithm) else {
            throw KeychainError(.verifyFailed, "the \(algorithm.rawValue) signature does not verify with this key.")
        }
        return true
    } ?? false
}

public func SecKeyCreateEncryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    keyOperation(error) { () throws(KeychainError) -> Data in try key.material.encrypt(plaintext, algorithm) }
}

public func SecKeyCreateDecryptedData(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    keyOperation(error) { () throws(KeychainError) -> Data in try key.material.decrypt(ciphertext, algorithm) }
}

/// ECDH between `privateKey` and `publicKey`: the raw shared secret, or for the X9.63 variants
/// `kSecKeyKeyExchangeParameterRequestedSize` bytes derived with
/// `kSecKeyKeyExchangeParameterSharedInfo`.
public func SecKeyCopyKeyExchangeResult(
    _ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    keyOperation(error) { () throws(KeychainError) -> Data in
        let strings = try SecDictionary.strings(parameters)
        let size = try strings[kSecKeyKeyExchangeParameterRequestedSize].map { value throws(KeychainError) in
            Int(try Convert.number(value, kSecKeyKeyExchangeParameterRequestedSize))
        }
        let sharedInfo = try strings[kSecKeyKeyExchangeParameterSharedInfo].map { value throws(KeychainError) in
            try Convert.data(value, kSecKeyKeyExchangeParameterSharedInfo)
        }
        return try privateKey.material.exchange(with: publicKey.material.publicKey, algorithm, size: size, sharedInfo: sharedInfo ?? Data())
    }
}

/// Runs a key call: its value, or nil with `error` set to Apple's status and Keyferry's sentence,
/// which the current context also keeps as its last failure.
private func keyOperation<T>(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ body: () throws(KeychainError) -> T) -> T? {
    do {
        return try body()
    } catch let failure {
        KeyferryContext.current?.recordFailure(failure)
        error?.pointee = Unmanaged.passRetained(CFError(failure.status.rawValue, failure.message))
        return nil
    }
}
