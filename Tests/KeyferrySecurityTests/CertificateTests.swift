import Foundation
import KeychainTesting
import KeyferrySecurity
import Testing

/// Certificates and identities as app code meets them: made by openssl (a DER certificate, a
/// `.p12` from `openssl pkcs12 -export`), read, stored, found and used through Keychain Services.
@Suite("Certificates and identities")
struct CertificateTests: OpenSSLTesting {
    let t: TestDevice
    let context: KeyferryContext
    let work: URL

    init() throws {
        t = try TestDevice()
        context = KeyferryContext(device: t.device, app: TestDevice.appID, passcode: t.passcode)
        work = t.directory.deletingLastPathComponent().appendingPathComponent("openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    /// A self-signed certificate and its key, by openssl: `key.pem`, `cert.pem` and its DER.
    func makeCertificate(_ key: [String] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], subject: String = "/CN=Alice Client/O=Example")
        throws -> Data
    {
        try openssl(["req", "-x509"] + key + ["-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", subject])
        return try openssl(["x509", "-in", "cert.pem", "-outform", "DER"])
    }

    func p12(password: String, extra: [String] = []) throws -> Data {
        try openssl(["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-name", "Alice", "-passout", "pass:\(password)"] + extra)
    }

    @Test("a DER certificate: its bytes, subject summary, serial number and public key as openssl sees them; PEM and garbage are refused")
    func certificate() throws {
        let der = try makeCertificate()
        let certificate = try #require(SecCertificateCreateWithData(nil, der as CFData))
        #expect(SecCertificateCopyData(certificate) == der)
        #expect(SecCertificateCopySubjectSummary(certificate) == "Alice Client")
        var commonName: CFString?
        #expect(SecCertificateCopyCommonName(certificate, &commonName) == errSecSuccess && commonName == "Alice Client")
        let serial = String(decoding: try openssl(["x509", "-in", "cert.pem", "-noout", "-serial"]), as: UTF8.self)
        let serialData = try #require(SecCertificateCopySerialNumberData(certificate, nil))
        #expect(serial.trimmingCharacters(in: .whitespacesAndNewlines) == "serial=" + serialData.map { String(format: "%02X", $0) }.joined())
        let spki = try openssl(["x509", "-in", "cert.pem", "-noout", "-pubkey", "-outform", "DER"])
        let point = try openssl(["pkey", "-pubin", "-in", try file("pub.pem", spki), "-outform", "DER"]).suffix(65)
        let key = try #require(SecCertificateCopyKey(certificate))
        #expect(SecKeyCopyExternalRepresentation(key, nil) == Data(point))

        #expect(SecCertificateCreateWithData(nil, try Data(contentsOf: work.appendingPathComponent("cert.pem")) as CFData) == nil, "PEM is not DER")
        #expect(SecCertificateCreateWithData(nil, Data("not a certificate".utf8) as CFData) == nil)
    }

    @Test("a certificate stored by ref: Apple's derived attributes (the public key's SHA-1 among them), found again by ref, and a duplicate refused")
    func storedCertificate() throws {
        let der = try makeCertificate()
        let certificate = try #require(SecCertificateCreateWithData(nil, der as CFData))
        var result: CFTypeRef?
        let add: [CFString: Any] = [kSecValueRef: certificate, kSecAttrLabel: "client cert", kSecReturnAttributes: true]
        #expect(context.run { SecItemAdd(add as CFDictionary, &result) } == errSecSuccess)
        let attributes = try #require(result as? [String: Any])
        #expect(attributes[kSecClass as String] as? String == kSecClassCertificate)
        #expect(attributes[kSecAttrCertificateType as String] as? Int == 3, "X.509 v3")
        #expect(attributes[kSecAttrCertificateEncoding as String] as? Int == 3, "DER")
        #expect(attributes[kSecAttrSerialNumber as String] as? Data == SecCertificateCopySerialNumberData(certificate, nil))
        let certificateKey = try #require(SecCertificateCopyKey(certificate))
        let point = try #require(SecKeyCopyExternalRepresentation(certificateKey, nil))
        let sha1 = try openssl(["dgst", "-sha1", "-binary", try file("point", point)])
        #expect(attributes[kSecAttrPublicKeyHash as String] as? Data == sha1)
        // openssl's subject key identifier is RFC 5280's: the same SHA-1 of the public key.
        #expect(attributes[kSecAttrSubjectKeyID as String] as? Data == sha1)
        #expect(attributes[kSecAttrLabel as String] as? String == "client cert")

        #expect(context.run { SecItemAdd([kSecValueRef: certificate] as CFDictionary, nil) } == errSecDuplicateItem)
        let query: [CFString: Any] = [kSecClass: kSecClassCertificate, kSecAttrLabel: "client cert", kSecReturnRef: true]
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecSuccess)
        #expect(result as? SecCertificate == certificate)
        #expect(context.run { SecItemDelete([kSecValueRef: certificate] as CFDictionary) } == errSecSuccess)
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecItemNotFound)
        // Added as data, the attributes are derived all the same.
        #expect(context.run { SecItemAdd([kSecClass: kSecClassCertificate, kSecValueData: der] as CFDictionary, nil) } == errSecSuccess)
        #expect(context.run { SecItemCopyMatching([kSecValueRef: certificate, kSecReturnRef: true] as CFDictionary, &result) } == errSecSuccess)
    }

    @Test(
        "SecPKCS12Import reads openssl's .p12 (EC and RSA): the identity, its chain, label and key ID, and a key whose signatures openssl verifies",
        arguments: [["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], ["-newkey", "rsa:2048"]])
    func pkcs12Import(key: [String]) throws {
        _ = try makeCertificate(key)
        var items: CFArray?
        let status = context.run {
            SecPKCS12Import(try! p12(password: "correct horse") as CFData, [kSecImportExportPassphrase: "correct horse"] as CFDictionary, &items)
        }
        #expect(status == errSecSuccess, "\(context.lastFailure ?? "")")
        let imported = try #require(items?.first as? [String: Any])
        #expect(items?.count == 1)
        #expect(imported[kSecImportItemLabel as String] as? String == "Alice")
        #expect(imported[kSecImportItemKeyID as String] is Data)
        #expect((imported[kSecImportItemCertChain as String] as? [SecCertificate])?.count == 1)
        let identity = try #require(imported[kSecImportItemIdentity as String] as? SecIdentity)
        var certificate: SecCertificate?
        var privateKey: SecKey?
        #expect(SecIdentityCopyCertificate(identity, &certificate) == errSecSuccess)
        #expect(SecIdentityCopyPrivateKey(identity, &privateKey) == errSecSuccess)
        #expect(SecCertificateCopySubjectSummary(try #require(certificate)) == "Alice Client")

        let message = Data("TLS client handshake".utf8)
        let rsa = key.contains("rsa:2048")
        let algorithm: SecKeyAlgorithm = rsa ? .rsaSignatureMessagePKCS1v15SHA256 : .ecdsaSignatureMessageX962SHA256
        let signer = try #require(privateKey)
        let signature = try #require(SecKeyCreateSignature(signer, algorithm, message, nil))
        let publicPEM = try openssl(["x509", "-in", "cert.pem", "-noout", "-pubkey"])
        try openssl(["dgst", "-sha256", "-verify", try file("pub.pem", publicPEM), "-signature", try file("sig", signature), try file("msg", message)])
    }

    @Test("a .p12 with its CA in the chain, and one whose key is not encrypted (a keyBag): the chain is the identity's certificate first")
    func pkcs12Chain() throws {
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Example CA"])
        _ = try makeCertificate()
        var items: CFArray?
        let chained = try p12(password: "pw", extra: ["-certfile", "ca.pem"])
        #expect(SecPKCS12Import(chained as CFData, [kSecImportExportPassphrase: "pw"] as CFDictionary, &items) == errSecSuccess)
        let chain = try #require((items?.first as? [String: Any])?[kSecImportItemCertChain as String] as? [SecCertificate])
        #expect(chain.map { SecCertificateCopySubjectSummary($0) } == ["Alice Client", "Example CA"])
        let plain = try p12(password: "pw", extra: ["-keypbe", "NONE", "-certpbe", "NONE"])
        #expect(SecPKCS12Import(plain as CFData, [kSecImportExportPassphrase: "pw"] as CFDictionary, &items) == errSecSuccess)
        #expect((items?.first as? [String: Any])?[kSecImportItemIdentity as String] is SecIdentity)
    }

    @Test("a wrong password is errSecAuthFailed, an empty one works when the file was made with it, a legacy cipher is named, and garbage is errSecDecode")
    func pkcs12Failures() throws {
        _ = try makeCertificate()
        let file = try p12(password: "right")
        var items: CFArray?
        #expect(SecPKCS12Import(file as CFData, [kSecImportExportPassphrase: "wrong"] as CFDictionary, &items) == errSecAuthFailed)
        #expect(SecPKCS12Import(file as CFData, [:] as CFDictionary, &items) == errSecAuthFailed)
        #expect(SecPKCS12Import(try p12(password: "") as CFData, [kSecImportExportPassphrase: ""] as CFDictionary, &items) == errSecSuccess)
        #expect(SecPKCS12Import(Data("PK not a p12".utf8) as CFData, [:] as CFDictionary, &items) == errSecDecode)
        #expect(SecPKCS12Import(file.prefix(file.count / 2) as CFData, [kSecImportExportPassphrase: "right"] as CFDictionary, &items) == errSecDecode)
        let legacy = try p12(password: "right", extra: ["-certpbe", "PBE-SHA1-3DES", "-keypbe", "PBE-SHA1-3DES"])
        let status = context.run { SecPKCS12Import(legacy as CFData, [kSecImportExportPassphrase: "right"] as CFDictionary, &items) }
        #expect(status == errSecUnimplemented)
        #expect(context.lastFailure?.contains("pbeWithSHAAnd3-KeyTripleDES-CBC") == true, "\(context.lastFailure ?? "")")
    }

    @Test("an identity added by ref is a certificate and its private key, found again as an identity whose key signs; deleted as one")
    func storedIdentity() throws {
        _ = try makeCertificate()
        var items: CFArray?
        #expect(SecPKCS12Import(try p12(password: "pw") as CFData, [kSecImportExportPassphrase: "pw"] as CFDictionary, &items) == errSecSuccess)
        let identity = try #require((items?.first as? [String: Any])?[kSecImportItemIdentity as String] as? SecIdentity)
        #expect(context.run { SecItemAdd([kSecValueRef: identity, kSecAttrLabel: "Alice"] as CFDictionary, nil) } == errSecSuccess)
        #expect(context.run { SecItemAdd([kSecValueRef: identity] as CFDictionary, nil) } == errSecDuplicateItem)

        var result: CFTypeRef?
        let query: [CFString: Any] = [kSecClass: kSecClassIdentity, kSecAttrLabel: "Alice", kSecReturnRef: true, kSecReturnAttributes: true]
        #expect(context.run { SecItemCopyMatching(query as CFDictionary, &result) } == errSecSuccess)
        let found = try #require((result as? [String: Any])?[kSecValueRef as String] as? SecIdentity)
        #expect(found == identity)
        var key: SecKey?
        #expect(SecIdentityCopyPrivateKey(found, &key) == errSecSuccess)
        let signer = try #require(key)
        #expect(SecKeyCreateSignature(signer, .ecdsaSignatureMessageX962SHA256, Data("m".utf8), nil) != nil)
        // Each half is an item of its own class.
        #expect(
            context.run { SecItemCopyMatching([kSecClass: kSecClassKey, kSecAttrKeyClass: kSecAttrKeyClassPrivate] as CFDictionary, nil) } == errSecSuccess)
        #expect(context.run { SecItemDelete([kSecClass: kSecClassIdentity, kSecAttrLabel: "Alice"] as CFDictionary) } == errSecSuccess)
        #expect(context.run { SecItemCopyMatching([kSecClass: kSecClassCertificate] as CFDictionary, nil) } == errSecItemNotFound)
        #expect(context.run { SecItemCopyMatching([kSecClass: kSecClassKey] as CFDictionary, nil) } == errSecItemNotFound)
    }
}
