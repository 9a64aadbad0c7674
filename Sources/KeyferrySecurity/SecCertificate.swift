import Crypto
public import Foundation
package import KeychainModel
import SwiftASN1
import X509
import _CryptoExtras

/// An X.509 certificate, as `SecCertificateCreateWithData` and `kSecReturnRef` hand it back:
/// its DER, read once.
public final class SecCertificate: Hashable, Sendable, CustomStringConvertible {
    /// The certificate as given, byte for byte.
    let der: Data
    let certificate: Certificate

    /// nil for bytes that are not one DER certificate.
    package init?(der: Data) {
        guard let certificate = try? Certificate(derEncoded: Array(der)) else { return nil }
        self.der = der
        self.certificate = certificate
    }

    public static func == (lhs: SecCertificate, rhs: SecCertificate) -> Bool { lhs.der == rhs.der }
    public func hash(into hasher: inout Hasher) { hasher.combine(der) }
    public var description: String { "<cert(\(subjectSummary ?? "no subject"))>" }

    /// What `SecCertificateCopySubjectSummary` answers: the subject's common name, else its
    /// email address (in the subject, then in the alternative names), else its organizational
    /// unit, else its organization.
    var subjectSummary: String? {
        let email = (try? certificate.extensions.subjectAlternativeNames)??.lazy.compactMap { name -> String? in
            if case .rfc822Name(let address) = name { address } else { nil }
        }.first
        return Self.summary(of: certificate.subject, alternativeEmail: email)
    }

    /// The same summary from a certificate item's kSecAttrSubject (its subject name in DER),
    /// for tools that list items without their data; nil when it does not decode.
    package static func summary(ofSubject der: Data) -> String? {
        (try? DistinguishedName(derEncoded: [UInt8](der))).flatMap { summary(of: $0, alternativeEmail: nil) }
    }

    private static func summary(of subject: DistinguishedName, alternativeEmail: String?) -> String? {
        let attributes = subject.flatMap { $0 }
        func last(_ type: ASN1ObjectIdentifier) -> String? { attributes.last { $0.type == type }.flatMap { String($0.value) } }
        if let name = last(.RDNAttributeType.commonName) ?? last(.RDNAttributeType.emailAddress) { return name }
        return alternativeEmail ?? last(.RDNAttributeType.organizationalUnitName) ?? last(.RDNAttributeType.organizationName)
    }

    /// The subject's public key, or nil for one Keyferry has no `SecKey` for (Ed25519).
    var publicKey: KeyMaterial? {
        let key = certificate.publicKey
        if let key = P256.Signing.PublicKey(key) { return .p256Public(key) }
        if let key = P384.Signing.PublicKey(key) { return .p384Public(key) }
        if let key = P521.Signing.PublicKey(key) { return .p521Public(key) }
        if let key = _RSA.Signing.PublicKey(key) { return .rsaPublic(key) }
        return nil
    }

    /// The attributes Apple's keychain derives from a certificate (`SecCertificateCopyAttributeDictionary`
    /// in `SecCertificate.c`): type (X.509 version + 1), DER encoding (3), subject, issuer, serial
    /// number, subject key ID, and the SHA-1 of the public key, which an identity's private key
    /// has as its application label. Subject and issuer are the names' DER as the certificate
    /// has them; Apple normalizes their case and spaces first.
    var itemAttributes: Attributes {
        var out: Attributes = [
            .certificateType: .number(certificate.version == .v1 ? 1 : certificate.version == .v3 ? 3 : 2),
            .certificateEncoding: .number(3),
            .serialNumber: .data(Data(certificate.serialNumber.bytes)),
        ]
        if let subject = try? Self.der(certificate.subject) { out[.subject] = .data(subject) }
        if let issuer = try? Self.der(certificate.issuer) { out[.issuer] = .data(issuer) }
        if let keyID = (try? certificate.extensions.subjectKeyIdentifier)??.keyIdentifier { out[.subjectKeyID] = .data(Data(keyID)) }
        if let publicKey { out[.publicKeyHash] = .data(publicKey.applicationLabel) }
        return out
    }

    /// What finds it, as Apple's keychain finds a certificate ref: its issuer and serial number.
    var identifyingAttributes: Attributes { itemAttributes.filter { $0.key == .issuer || $0.key == .serialNumber } }

    /// The certificates-class item that keeps it: the derived attributes and its DER as data.
    package var newItem: NewItem { NewItem(.certificate, attributes: itemAttributes, data: der) }

    private static func der(_ name: DistinguishedName) throws -> Data {
        var serializer = DER.Serializer()
        try serializer.serialize(name)
        return Data(serializer.serializedBytes)
    }
}

/// A certificate from its DER; nil for anything else (PEM included, as Apple's).
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    SecCertificate(der: data)
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData { certificate.der }

public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? { certificate.subjectSummary }

/// The certificate's public key; nil for a key type Keyferry has no `SecKey` for.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? { certificate.publicKey.map { SecKey($0) } }

/// The subject's last common name; errSecSuccess with nil when it has none, as Apple's.
public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>) -> OSStatus {
    commonName.pointee = certificate.certificate.subject.flatMap { $0 }.last { $0.type == .RDNAttributeType.commonName }.flatMap { String($0.value) }
    return errSecSuccess
}

/// The serial number's bytes, as the certificate encodes them.
public func SecCertificateCopySerialNumberData(_ certificate: SecCertificate, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    Data(certificate.certificate.serialNumber.bytes)
}
