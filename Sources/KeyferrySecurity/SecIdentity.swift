public import Foundation
package import KeychainModel

/// A certificate and its private key, as `SecPKCS12Import` and `kSecReturnRef` on
/// `kSecClassIdentity` hand them back.
public final class SecIdentity: Hashable, Sendable, CustomStringConvertible {
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }

    public static func == (lhs: SecIdentity, rhs: SecIdentity) -> Bool { lhs.certificate == rhs.certificate && lhs.privateKey == rhs.privateKey }
    public func hash(into hasher: inout Hasher) { hasher.combine(certificate) }
    public var description: String { "<SecIdentity \(certificate), \(privateKey)>" }

    /// Its certificate's subject summary, for tools.
    package var subjectSummary: String? { certificate.subjectSummary }

    /// "P-256", "RSA 2048" ...: its private key, for tools.
    package var keyDescription: String {
        privateKey.material.kind == .rsa ? "RSA \(privateKey.material.bits)" : "P-\(privateKey.material.bits)"
    }

    /// The two items that keep it, as Apple's keychain keeps an identity: the certificate, and
    /// the private key whose application label is the certificate's public key hash.
    package var newItems: (certificate: NewItem, privateKey: NewItem) { (certificate.newItem, privateKey.newItem) }

    /// The identities of a PKCS #12 file: each private key with the certificate of its public
    /// key, the other certificates its chain.
    package static func identities(in file: PKCS12) throws(KeychainError) -> [(identity: SecIdentity, chain: [SecCertificate], bag: PKCS12.Bag)] {
        var certificates: [SecCertificate] = []
        for bag in file.certificates {
            guard let certificate = SecCertificate(der: bag.der) else { throw KeychainError(.decode, "a certificate in the PKCS #12 file is not DER X.509.") }
            certificates.append(certificate)
        }
        return try file.keys.map { bag throws(KeychainError) in
            let material = try KeyMaterial(pkcs8: bag.der)
            guard let certificate = certificates.first(where: { $0.publicKey?.applicationLabel == material.applicationLabel }) else {
                throw KeychainError(.decode, "the PKCS #12 file holds a private key without its certificate.")
            }
            let key = SecKey(material, attributes: bag.friendlyName.map { [.label: .string($0)] } ?? [:])
            return (SecIdentity(certificate: certificate, privateKey: key), [certificate] + certificates.filter { $0 != certificate }, bag)
        }
    }
}

public func SecIdentityCopyCertificate(_ identityRef: SecIdentity, _ certificateRef: UnsafeMutablePointer<SecCertificate?>) -> OSStatus {
    certificateRef.pointee = identityRef.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKeyRef: UnsafeMutablePointer<SecKey?>) -> OSStatus {
    privateKeyRef.pointee = identity.privateKey
    return errSecSuccess
}

/// Reads a PKCS #12 file with `kSecImportExportPassphrase`, as on iOS: nothing is added to the
/// keychain; each identity comes back in a dictionary with `kSecImportItemIdentity`,
/// `kSecImportItemCertChain` (its certificate first), and `kSecImportItemLabel` and
/// `kSecImportItemKeyID` when the file names them. A wrong password is errSecAuthFailed; a
/// file that is not PKCS #12 is errSecDecode. (No `kSecImportItemTrust`: Keyferry has no trust
/// evaluation.)
public func SecPKCS12Import(_ pkcs12_data: CFData, _ options: CFDictionary, _ items: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    do throws(KeychainError) {
        let strings = try SecDictionary.strings(options)
        let password = try strings[kSecImportExportPassphrase].map { value throws(KeychainError) in
            guard let password = value as? String else { throw KeychainError(.param, "kSecImportExportPassphrase takes a string.") }
            return password
        }
        let identities = try SecIdentity.identities(in: try PKCS12(pkcs12_data, password: password ?? ""))
        items.pointee = identities.map { found in
            var item: [String: Any] = [kSecImportItemIdentity: found.identity, kSecImportItemCertChain: found.chain]
            if let label = found.bag.friendlyName { item[kSecImportItemLabel] = label }
            if let keyID = found.bag.localKeyID { item[kSecImportItemKeyID] = keyID }
            return item
        }
        return errSecSuccess
    } catch let failure {
        KeyferryContext.current?.recordFailure(failure)
        return failure.status.rawValue
    }
}
