import Foundation
import KeyferrySecurity
import Testing

/// Keychain Services calls against devices the command line made: through a running node, and
/// in this process when no node runs.
@Suite("KeyferrySecurity on device directories")
struct SecurityCLITests {
    static func add(_ account: String, _ value: String) -> OSStatus {
        SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecValueData: Data(value.utf8),
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock] as CFDictionary, nil)
    }

    static func read(_ account: String) -> (OSStatus, Data?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrAccount: account, kSecReturnData: true] as CFDictionary, &result)
        return (status, result as? Data)
    }

    @Test("through a running node: calls reach its device, the command line sees the items, a lock shows at once")
    func throughNode() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail")
        defer { context.close() }
        context.run {
            #expect(Self.add("token", "s3cret") == errSecSuccess)
            #expect(Self.add("token", "again") == errSecDuplicateItem)
            #expect(Self.read("token").1 == Data("s3cret".utf8))
        }
        #expect(try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", "token"]).text == "s3cret")
        try cli.ok(["node", "reboot", dir])
        context.run { #expect(Self.read("token").0 == errSecInteractionNotAllowed) }
        #expect(context.lastFailure?.isEmpty == false)
        try cli.ok(["node", "stop", dir])
        context.run { #expect(Self.read("token").0 == errSecNotAvailable, "a node that stopped: no keychain") }
    }

    @Test("a directory no node runs is powered on in this process, unlocked, and held: no node starts meanwhile")
    func inProcess() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "a", "--value", "v", "--accessible", "afterFirstUnlock"])
        try cli.ok(["node", "stop", dir])

        #expect(throws: (any Error).self) { try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail", passcode: "000000") }
        let context = try KeyferryContext(device: URL(fileURLWithPath: dir), app: "com.example.mail", passcode: "123456")
        context.run {
            #expect(Self.read("a").1 == Data("v".utf8))
            #expect(Self.add("b", "w") == errSecSuccess)
        }
        let start = try cli.run(["node", "start", dir])
        #expect(start.status != 0, "the device is held by this process: \(start.stderr)")
        context.close()
        try cli.ok(["node", "start", dir])
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        #expect(try cli.ok(["item", "get", dir, "--app", "com.example.mail", "--account", "b"]).text == "w")
    }
}
