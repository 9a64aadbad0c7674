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
        }
        context.flushAudit()
        return try context.audit.read()
    }

    private static func describe(_ status: OSStatus) -> String {
        "\(status) (\(SecCopyErrorMessageString(status, nil) ?? "?"))"
    }
}
