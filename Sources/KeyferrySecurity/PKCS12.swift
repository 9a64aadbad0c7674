import Crypto
package import Foundation
package import KeychainModel
import SwiftASN1
import _CryptoExtras

/// The contents of a PKCS #12 file (RFC 7292), as `openssl pkcs12 -export` and Apple's tools
/// write it: certificates and private keys, each with its friendly name and local key ID. The
/// integrity MAC is checked first (a wrong password fails there, as errSecAuthFailed); the
/// bags are encrypted with PBES2 (PBKDF2 and AES-CBC), OpenSSL 3's default. The legacy ciphers
/// (`-legacy`: RC2 and triple DES) are named and refused.
package struct PKCS12: Sendable {
    package struct Bag: Sendable {
        /// A certificate's DER, or a private key's PKCS #8.
        package var der: Data
        package var friendlyName: String?
        package var localKeyID: Data?
    }

    package var certificates: [Bag] = []
    package var keys: [Bag] = []

    /// The most key-derivation work a file may ask for, all its derivations together: far above
    /// any exporter's (OpenSSL 3 uses 2,048 a derivation; Apple 2,000), and a bound on what a
    /// hostile file of many bags costs.
    static let maximumIterations = 10_000_000

    package init(_ data: Data, password: String) throws(KeychainError) {
        do {
            try read(Array(data), passphrase: Passphrase(password))
        } catch let error as KeychainError {
            throw error
        } catch {
            // The parser's own error names its source file and line, not the user's input.
            throw KeychainError(.decode, "the data is not a PKCS #12 file: its DER structure is malformed or truncated.")
        }
    }

    private mutating func read(_ bytes: [UInt8], passphrase: Passphrase) throws {
        let (safe, mac) = try DER.sequence(try DER.parse(bytes), identifier: .sequence) { nodes in
            guard try Int(derEncoded: &nodes) == 3 else { throw KeychainError(.decode, "the PKCS #12 file is not version 3.") }
            let safe = try Self.dataContent(try Self.next(&nodes))
            let mac = try nodes.next().map(MacData.init)
            return (safe, mac)
        }
        if let mac {
            try mac.check(safe, passphrase: passphrase)
        }
        try DER.sequence(try DER.parse(safe), identifier: .sequence) { nodes in
            while let contentInfo = nodes.next() {
                try readContents(try Self.contents(contentInfo, passphrase: passphrase), passphrase: passphrase)
            }
        }
    }

    /// A SafeContents: certificate and key bags; other bags (CRLs, secrets) are passed over.
    private mutating func readContents(_ bytes: ArraySlice<UInt8>, passphrase: Passphrase) throws {
        try DER.sequence(try DER.parse(bytes), identifier: .sequence) { bags in
            while let bag = bags.next() {
                try DER.sequence(bag, identifier: .sequence) { fields in
                    let type = try ASN1ObjectIdentifier(derEncoded: &fields)
                    let value = try DER.explicitlyTagged(&fields, tagNumber: 0, tagClass: .contextSpecific) { $0 }
                    let (friendlyName, localKeyID) = try fields.next().map(Self.attributes) ?? (nil, nil)
                    switch type {
                    case OID.certBag:
                        let der = try DER.sequence(value, identifier: .sequence) { certBag in
                            guard try ASN1ObjectIdentifier(derEncoded: &certBag) == OID.x509Certificate else { return nil as Data? }
                            return try DER.explicitlyTagged(&certBag, tagNumber: 0, tagClass: .contextSpecific) {
                                Data(try ASN1OctetString(derEncoded: $0).bytes)
                            }
                        }
                        if let der { certificates.append(Bag(der: der, friendlyName: friendlyName, localKeyID: localKeyID)) }
                    case OID.keyBag:
                        keys.append(Bag(der: Data(value.encodedBytes), friendlyName: friendlyName, localKeyID: localKeyID))
                    case OID.shroudedKeyBag:
                        let pkcs8 = try DER.sequence(value, identifier: .sequence) { info in
                            let algorithm = try Self.next(&info)
                            return try Encryption(algorithm).decrypt(try ASN1OctetString(derEncoded: &info).bytes, passphrase: passphrase)
                        }
                        keys.append(Bag(der: pkcs8, friendlyName: friendlyName, localKeyID: localKeyID))
                    default:
                        break
                    }
                }
            }
        }
    }

    /// A ContentInfo of the authenticated safe: plain data, or data encrypted with the password.
    private static func contents(_ node: ASN1Node, passphrase: Passphrase) throws -> ArraySlice<UInt8> {
        try DER.sequence(node, identifier: .sequence) { nodes in
            let type = try ASN1ObjectIdentifier(derEncoded: &nodes)
            let content = try DER.explicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { $0 }
            switch type {
            case OID.data:
                return try ASN1OctetString(derEncoded: content).bytes
            case OID.encryptedData:
                return try DER.sequence(content, identifier: .sequence) { encryptedData in
                    _ = try Int(derEncoded: &encryptedData)
                    return try DER.sequence(try next(&encryptedData), identifier: .sequence) { info in
                        _ = try ASN1ObjectIdentifier(derEncoded: &info)
                        let algorithm = try Encryption(try next(&info))
                        guard let encrypted = info.next(), encrypted.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific),
                            case .primitive(let ciphertext) = encrypted.content
                        else {
                            throw KeychainError(.decode, "the PKCS #12 file's encrypted content is missing or not in DER.")
                        }
                        return ArraySlice(try algorithm.decrypt(ciphertext, passphrase: passphrase))
                    }
                }
            default:
                throw KeychainError(.decode, "the PKCS #12 file holds content of type \(type), which Keyferry does not read (public-key privacy or integrity).")
            }
        }
    }

    /// The authenticated safe: the content of an id-data ContentInfo.
    private static func dataContent(_ node: ASN1Node) throws -> ArraySlice<UInt8> {
        try DER.sequence(node, identifier: .sequence) { nodes in
            let type = try ASN1ObjectIdentifier(derEncoded: &nodes)
            guard type == OID.data else {
                throw KeychainError(.decode, "the PKCS #12 file uses public-key integrity (\(type)); Keyferry reads password integrity only.")
            }
            return try DER.explicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { try ASN1OctetString(derEncoded: $0).bytes }
        }
    }

    /// A bag's friendly name (a BMPString) and local key ID.
    private static func attributes(_ node: ASN1Node) throws -> (String?, Data?) {
        var (name, keyID): (String?, Data?) = (nil, nil)
        try DER.set(node, identifier: .set) { attributes in
            while let attribute = attributes.next() {
                try DER.sequence(attribute, identifier: .sequence) { fields in
                    let type = try ASN1ObjectIdentifier(derEncoded: &fields)
                    let value = try DER.set(try next(&fields), identifier: .set) { try next(&$0) }
                    switch type {
                    case OID.friendlyName:
                        if case .primitive(let bytes) = value.content {
                            let units = stride(from: bytes.startIndex, to: bytes.endIndex - 1, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
                            name = String(decoding: units, as: UTF16.self)
                        }
                    case OID.localKeyID: keyID = Data(try ASN1OctetString(derEncoded: value).bytes)
                    default: break
                    }
                }
            }
        }
        return (name, keyID)
    }

    fileprivate static func next(_ nodes: inout ASN1NodeCollection.Iterator) throws -> ASN1Node {
        guard let node = nodes.next() else { throw KeychainError(.decode, "the PKCS #12 file ends in the middle of a structure.") }
        return node
    }

    /// An AlgorithmIdentifier's algorithm, its parameters (NULL or absent) passed over.
    fileprivate static func algorithm(_ node: ASN1Node) throws -> ASN1ObjectIdentifier {
        try DER.sequence(node, identifier: .sequence) { fields in
            defer { while fields.next() != nil {} }
            return try ASN1ObjectIdentifier(derEncoded: &fields)
        }
    }

    fileprivate static func checkIterations(_ count: Int) throws {
        guard (1...maximumIterations).contains(count) else {
            throw KeychainError(.decode, "the PKCS #12 file asks for \(count) iterations; Keyferry reads 1 to \(maximumIterations).")
        }
    }
}

/// The password, and the key-derivation work the file may still ask for: each derivation
/// spends its iterations, so that many bags cost no more than `PKCS12.maximumIterations`.
private final class Passphrase {
    let text: String
    private var iterationsLeft = PKCS12.maximumIterations

    init(_ text: String) { self.text = text }

    func spend(_ iterations: Int) throws {
        guard iterations <= iterationsLeft else {
            throw KeychainError(.decode, "the PKCS #12 file asks for more than \(PKCS12.maximumIterations) key-derivation iterations in all.")
        }
        iterationsLeft -= iterations
    }
}

/// The integrity check: an HMAC over the authenticated safe, keyed by the PKCS #12 KDF.
private struct MacData {
    var hash: Digests.Hash
    var digest: ArraySlice<UInt8>
    var salt: ArraySlice<UInt8>
    var iterations: Int

    init(_ node: ASN1Node) throws {
        (hash, digest, salt, iterations) = try DER.sequence(node, identifier: .sequence) { nodes in
            let (hash, digest) = try DER.sequence(try PKCS12.next(&nodes), identifier: .sequence) { info in
                let algorithm = try PKCS12.algorithm(try PKCS12.next(&info))
                guard let hash = OID.digests[algorithm] else {
                    throw KeychainError(.decode, "the PKCS #12 file's MAC uses \(algorithm), not SHA-1, SHA-256, SHA-384 or SHA-512.")
                }
                return (hash, try ASN1OctetString(derEncoded: &info).bytes)
            }
            let salt = try ASN1OctetString(derEncoded: &nodes).bytes
            let iterations = try nodes.next().map { try Int(derEncoded: $0) } ?? 1
            try PKCS12.checkIterations(iterations)
            return (hash, digest, salt, iterations)
        }
    }

    func check(_ safe: ArraySlice<UInt8>, passphrase: Passphrase) throws {
        try passphrase.spend(iterations)
        let key = SymmetricKey(data: PKCS12KDF.derive(password: passphrase.text, salt: salt, id: 3, iterations: iterations, hash: hash, count: hash.byteCount))
        let mac: Data =
            switch hash {
            case .sha1: Data(HMAC<Insecure.SHA1>.authenticationCode(for: safe, using: key))
            case .sha256: Data(HMAC<SHA256>.authenticationCode(for: safe, using: key))
            case .sha384: Data(HMAC<SHA384>.authenticationCode(for: safe, using: key))
            case .sha512: Data(HMAC<SHA512>.authenticationCode(for: safe, using: key))
            }
        guard mac == Data(digest) else { throw KeychainError(.authFailed, "the PKCS #12 password is wrong (its integrity check fails).") }
    }
}

/// How a bag or the safe is encrypted: PBES2 with PBKDF2 and AES-CBC.
private struct Encryption {
    var salt: ArraySlice<UInt8>
    var iterations: Int
    var prf: KDF.Insecure.PBKDF2.HashFunction
    var keySize: Int
    var iv: ArraySlice<UInt8>

    init(_ node: ASN1Node) throws {
        (salt, iterations, prf, keySize, iv) = try DER.sequence(node, identifier: .sequence) { nodes in
            let scheme = try ASN1ObjectIdentifier(derEncoded: &nodes)
            guard scheme == OID.pbes2 else {
                let name = OID.legacyCiphers[scheme] ?? "\(scheme)"
                throw KeychainError(
                    .unimplemented,
                    "the PKCS #12 file is encrypted with \(name), a legacy cipher Keyferry does not read; export it with OpenSSL 3's defaults (openssl pkcs12 -export, without -legacy: AES-256-CBC)."
                )
            }
            return try DER.sequence(try PKCS12.next(&nodes), identifier: .sequence) { parameters in
                let (salt, iterations, prf) = try DER.sequence(try PKCS12.next(&parameters), identifier: .sequence) { kdf in
                    guard try ASN1ObjectIdentifier(derEncoded: &kdf) == OID.pbkdf2 else { throw KeychainError(.decode, "PBES2 without PBKDF2.") }
                    return try DER.sequence(try PKCS12.next(&kdf), identifier: .sequence) { fields in
                        let salt = try ASN1OctetString(derEncoded: &fields).bytes
                        let iterations = try Int(derEncoded: &fields)
                        try PKCS12.checkIterations(iterations)
                        var prf = KDF.Insecure.PBKDF2.HashFunction.insecureSHA1
                        while let field = fields.next() {
                            guard field.identifier == .sequence else { continue }  // the optional key length
                            let oid = try PKCS12.algorithm(field)
                            guard let function = OID.prfs[oid] else { throw KeychainError(.decode, "PBKDF2 with \(oid), not HMAC-SHA-1 or SHA-2.") }
                            prf = function
                        }
                        return (salt, iterations, prf)
                    }
                }
                let (keySize, iv) = try DER.sequence(try PKCS12.next(&parameters), identifier: .sequence) { cipher in
                    let oid = try ASN1ObjectIdentifier(derEncoded: &cipher)
                    guard let keySize = OID.aesCBC[oid] else { throw KeychainError(.decode, "PBES2 with \(oid), not AES-CBC.") }
                    return (keySize, try ASN1OctetString(derEncoded: &cipher).bytes)
                }
                return (salt, iterations, prf, keySize, iv)
            }
        }
    }

    /// The plaintext; a wrong password shows as bad padding, errSecAuthFailed.
    func decrypt(_ ciphertext: ArraySlice<UInt8>, passphrase: Passphrase) throws -> Data {
        try passphrase.spend(iterations)
        let key = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(passphrase.text.utf8), salt: salt, using: prf, outputByteCount: keySize, unsafeUncheckedRounds: iterations)
        do {
            return try AES._CBC.decrypt(ciphertext, using: key, iv: try AES._CBC.IV(ivBytes: iv))
        } catch {
            throw KeychainError(.authFailed, "the PKCS #12 contents do not decrypt: the password is wrong, or the file is damaged.")
        }
    }
}

/// RFC 7292, appendix B: the key derivation of PKCS #12's MAC (and legacy ciphers), over the
/// password as a BMPString with its two terminating zero bytes.
enum PKCS12KDF {
    static func derive(password: String, salt: ArraySlice<UInt8>, id: UInt8, iterations: Int, hash: Digests.Hash, count: Int) -> [UInt8] {
        let u = hash.byteCount
        let v = hash == .sha384 || hash == .sha512 ? 128 : 64
        let passwordBytes: [UInt8] = password.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] } + [0, 0]
        func stretched(_ bytes: [UInt8]) -> [UInt8] {
            bytes.isEmpty ? [] : (0..<(v * ((bytes.count + v - 1) / v))).map { bytes[$0 % bytes.count] }
        }
        var input = stretched(Array(salt)) + stretched(passwordBytes)
        let diversifier = [UInt8](repeating: id, count: v)
        var output: [UInt8] = []
        while output.count < count {
            var a = digest(diversifier + input, hash)
            for _ in 1..<iterations { a = digest(a, hash) }
            output += a
            let b = (0..<v).map { a[$0 % u] }
            // Each v-byte block of the input becomes (block + b + 1) mod 2^(8v).
            for start in stride(from: 0, to: input.count, by: v) {
                var carry = 1
                for index in (0..<v).reversed() {
                    let sum = Int(input[start + index]) + Int(b[index]) + carry
                    input[start + index] = UInt8(sum & 0xff)
                    carry = sum >> 8
                }
            }
        }
        return Array(output.prefix(count))
    }

    private static func digest(_ bytes: [UInt8], _ hash: Digests.Hash) -> [UInt8] { Array(Digests.of(Data(bytes), hash)) }
}

/// The object identifiers a PKCS #12 file names.
private enum OID {
    static let data: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 1]
    static let encryptedData: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 6]
    static let keyBag: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 1]
    static let shroudedKeyBag: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 2]
    static let certBag: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 3]
    static let x509Certificate: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 22, 1]
    static let friendlyName: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 20]
    static let localKeyID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 21]
    static let pbes2: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 13]
    static let pbkdf2: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 12]
    static let prfs: [ASN1ObjectIdentifier: KDF.Insecure.PBKDF2.HashFunction] = [
        [1, 2, 840, 113549, 2, 7]: .insecureSHA1, [1, 2, 840, 113549, 2, 9]: .sha256,
        [1, 2, 840, 113549, 2, 10]: .sha384, [1, 2, 840, 113549, 2, 11]: .sha512,
    ]
    /// AES-CBC's identifiers and key sizes in bytes.
    static let aesCBC: [ASN1ObjectIdentifier: Int] = [
        [2, 16, 840, 1, 101, 3, 4, 1, 2]: 16, [2, 16, 840, 1, 101, 3, 4, 1, 22]: 24, [2, 16, 840, 1, 101, 3, 4, 1, 42]: 32,
    ]
    static let digests: [ASN1ObjectIdentifier: Digests.Hash] = [
        [1, 3, 14, 3, 2, 26]: .sha1, [2, 16, 840, 1, 101, 3, 4, 2, 1]: .sha256,
        [2, 16, 840, 1, 101, 3, 4, 2, 2]: .sha384, [2, 16, 840, 1, 101, 3, 4, 2, 3]: .sha512,
    ]
    static let legacyCiphers: [ASN1ObjectIdentifier: String] = [
        [1, 2, 840, 113549, 1, 12, 1, 1]: "pbeWithSHAAnd128BitRC4", [1, 2, 840, 113549, 1, 12, 1, 2]: "pbeWithSHAAnd40BitRC4",
        [1, 2, 840, 113549, 1, 12, 1, 3]: "pbeWithSHAAnd3-KeyTripleDES-CBC", [1, 2, 840, 113549, 1, 12, 1, 4]: "pbeWithSHAAnd2-KeyTripleDES-CBC",
        [1, 2, 840, 113549, 1, 12, 1, 5]: "pbeWithSHAAnd128BitRC2-CBC", [1, 2, 840, 113549, 1, 12, 1, 6]: "pbeWithSHAAnd40BitRC2-CBC",
    ]
}
