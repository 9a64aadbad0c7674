import Foundation
import KeyferrySecurity

/// The mail app's own keychain code in the demo, written as for iOS and run through
/// KeyferrySecurity against the phone's node: three of the seeds' traps, then the audit.
enum DemoAppCode {
    /// The app's next version as its developer has it before running it: a settings screen
    /// that reads the token on the main actor, and keeps a copy in UserDefaults.
    static let nextVersionSource = """
        import Foundation

        @MainActor
        final class MailSettings {
            func loadToken() -> Data? {
                let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                            kSecAttrService as String: "com.example.mail.api",
                                            kSecAttrAccount as String: "refresh-token",
                                            kSecReturnData as String: true]
                var result: CFTypeRef?
                guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
                UserDefaults.standard.set(result as? Data, forKey: "refresh-token")
                return result as? Data
            }
        }

        """

    /// Runs on a thread of its own (each call waits for the node); says what each call answered.
    static func run(device: URL, app: String, say: (String) -> Void) throws -> AuditReport {
        let context = try KeyferryContext(device: device, app: app)
        defer { context.close() }
        try context.audit.clear()
        context.run {
            let token: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: "com.example.mail.api",
                kSecAttrAccount as String: "refresh-token",
                kSecValueData as String: Data("r3fr3sh".utf8),
            ]
            say("SecItemAdd refresh-token, no kSecAttrAccessible: \(describe(SecItemAdd(token as CFDictionary, nil)))")
            say("SecItemAdd refresh-token again, the result ignored: \(describe(SecItemAdd(token as CFDictionary, nil)))")
            var result: CFTypeRef?
            let search: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: "com.example.mail.api",
                kSecAttrAccount as String: "refresh-token",
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                kSecReturnData as String: true,
            ]
            say("SecItemCopyMatching with kSecAttrAccessible in the search: \(describe(SecItemCopyMatching(search as CFDictionary, &result)))")
            signRequest(say: say)
            pinServerCertificate(say: say)
        }
        context.flushAudit()
        return try context.audit.read()
    }

    /// A device key for signing API requests, made in the Secure Enclave, kept in the keychain
    /// and found again by its tag.
    private static func signRequest(say: (String) -> Void) {
        var error: Unmanaged<CFError>?
        let tag = Data("com.example.mail.request-signing".utf8)
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag, kSecAttrLabel as String: "request signing",
            ],
        ]
        guard SecKeyCreateRandomKey(parameters as CFDictionary, &error) != nil else {
            return say("SecKeyCreateRandomKey failed: \(error.map { "\($0.takeRetainedValue())" } ?? "")")
        }
        var found: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag, kSecReturnRef as String: true]
        let status = SecItemCopyMatching(query as CFDictionary, &found)
        guard let key = found as? SecKey, let publicKey = SecKeyCopyPublicKey(key) else { return say("the signing key was not found: \(describe(status))") }
        let request = Data("GET /inbox".utf8)
        guard let signature = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, request, &error) else {
            return say("SecKeyCreateSignature failed: \(error.map { "\($0.takeRetainedValue())" } ?? "")")
        }
        let verified = SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, request, signature, &error)
        let exported = SecKeyCopyExternalRepresentation(key, &error) != nil
        say(
            "SecKeyCreateRandomKey in the Secure Enclave, found again by its tag: a \(signature.count)-byte ECDSA signature of the request, "
                + (verified ? "verified by its public key" : "NOT verified")
                + (exported ? "; its private key EXPORTED" : "; its private key cannot be exported (errSecUnimplemented)"))
    }

    /// The mail server's certificate, pinned in the keychain for TLS.
    private static func pinServerCertificate(say: (String) -> Void) {
        guard let certificate = SecCertificateCreateWithData(nil, Data(base64Encoded: mailServerCertificate)! as CFData) else {
            return say("SecCertificateCreateWithData refused the pinned certificate")
        }
        let status = SecItemAdd([kSecValueRef as String: certificate, kSecAttrLabel as String: "pinned mail server"] as CFDictionary, nil)
        say("SecItemAdd of the pinned certificate for \(SecCertificateCopySubjectSummary(certificate) ?? "?"): \(describe(status))")
    }

    /// mail.example.com's self-signed P-256 certificate (DER, base64), valid until 2126.
    private static let mailServerCertificate = """
        MIIBvDCCAWGgAwIBAgIUOFrcCYzrVkqIswLUIXt2eRcMvoAwCgYIKoZIzj0EAwIwMjEZMBcGA1UEAwwQbWFpbC5leGFtcGxlLmNv\
        bTEVMBMGA1UECgwMRXhhbXBsZSBNYWlsMCAXDTI2MTEyNjExMDcxMloYDzIxMjYxMTAyMTEwNzEyWjAyMRkwFwYDVQQDDBBtYWls\
        LmV4YW1wbGUuY29tMRUwEwYDVQQKDAxFeGFtcGxlIE1haWwwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARTmoZ5hjMTKr7eMJKx\
        +e3jZRNOOKaw3O1t8A07DT+GkUS/4BBUP4xSo7MDM0mbTxTqIP+c9I2O199qglAsUQA5o1MwUTAdBgNVHQ4EFgQUHND+As6MC/VE\
        v3NB+e+xHcmnZqswHwYDVR0jBBgwFoAUHND+As6MC/VEv3NB+e+xHcmnZqswDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJ\
        ADBGAiEA1KjjUzERZ4E6UVGS7oTfyEzzKT40DN3rtJKD+amExhwCIQCBjxCNdHENQSF+DtNW8CMt4LZ2UKPSkdRv3hcdBfVgDw==
        """

    private static func describe(_ status: OSStatus) -> String {
        "\(status) (\(SecCopyErrorMessageString(status, nil) ?? "?"))"
    }
}
