import Foundation
import KeyferrySecurity

/// The mail app's own keychain code in the demo, written as for iOS and run through
/// KeyferrySecurity against the phone's node: three of the seeds' traps, then the audit.
enum DemoAppCode {
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
        }
        context.flushAudit()
        return try context.audit.read()
    }

    /// A device key for signing API requests, kept in the keychain and found again by its tag.
    private static func signRequest(say: (String) -> Void) {
        var error: Unmanaged<CFError>?
        let tag = Data("com.example.mail.request-signing".utf8)
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag],
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
        say(
            "SecKeyCreateRandomKey P-256, kSecAttrIsPermanent, found again by its tag: a \(signature.count)-byte ECDSA signature of the request, "
                + (verified ? "verified by its public key" : "NOT verified"))
    }

    private static func describe(_ status: OSStatus) -> String {
        "\(status) (\(SecCopyErrorMessageString(status, nil) ?? "?"))"
    }
}
