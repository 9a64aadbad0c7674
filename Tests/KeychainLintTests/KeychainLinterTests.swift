import Foundation
import KeychainLint
import KeychainModel
import Testing

/// The audit's traps and the seeds' checklists, found in source as app code and wrappers
/// write it: each rule on code that breaks it and on code written the recommended way.
@Suite("keyferry lint's rules")
struct KeychainLinterTests {
    func found(_ source: String) -> [String] {
        KeychainLinter.lint(source: source, file: "App.swift").map { "\($0.line):\($0.rule.name)" }
    }

    @Test("kSecAttrAccessible in a search, inline or in a variable, whatever the casts")
    func accessibilityInSearch() {
        #expect(
            found(
                """
                func read() {
                    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock,
                                                kSecReturnData as String: true]
                    var result: AnyObject?
                    let status = SecItemCopyMatching(query as CFDictionary, &result)
                    _ = status
                    SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked] as CFDictionary)
                }
                """) == ["6:accessibilityInSearch", "8:accessibilityInSearch", "8:cleanupMissesSyncedItems"])
        #expect(
            KeychainLinter.lint(
                source:
                    "func f() { let q = [kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecAttrAccount: \"a\"]; _ = SecItemUpdate(q as CFDictionary, [:] as CFDictionary) }",
                file: "A.swift"
            ).first?.detail == "searches with kSecAttrAccessibleWhenUnlocked")
    }

    @Test("an add without accessibility, unless a later assignment or an access control gives it")
    func noAccessibilityOnAdd() {
        #expect(
            found(
                """
                func save(_ data: Data) -> OSStatus {
                    let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecValueData as String: data]
                    return SecItemAdd(item as CFDictionary, nil)
                }
                func saveBetter(_ data: Data) -> OSStatus {
                    var item: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecValueData: data]
                    item[kSecAttrAccessible] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
                    return SecItemAdd(item as CFDictionary, nil)
                }
                func saveCopy(_ data: Data, control: SecAccessControl) -> OSStatus {
                    let base: [CFString: Any] = [kSecClass: kSecClassGenericPassword]
                    var item = base
                    item[kSecAttrAccessControl] = control
                    return SecItemAdd(item as CFDictionary, nil)
                }
                func saveGiven(_ item: [String: Any]) -> OSStatus { SecItemAdd(item as CFDictionary, nil) }
                func saveMerged(_ extra: [String: Any]) -> OSStatus {
                    var item: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
                    item.merge(extra) { $1 }
                    return SecItemAdd(item as CFDictionary, nil)
                }
                """) == ["3:noAccessibilityOnAdd"], "a parameter or a merge is left to the audit")
    }

    @Test("the deprecated Always classes, wherever they are named, as iOS 12's SDK warns")
    func deprecatedAlways() {
        let findings = KeychainLinter.lint(
            source: "let a = kSecAttrAccessibleAlways\nlet b = kSecAttrAccessibleAlwaysThisDeviceOnly as String", file: "A.swift")
        #expect(findings.map(\.rule) == [.trap(.deprecatedAlways), .trap(.deprecatedAlways)])
        #expect(findings.map(\.column) == [9, 9])
        #expect(findings.first?.detail == "stores with kSecAttrAccessibleAlways")
        let definition = "@available(*, deprecated)\npublic let kSecAttrAccessibleAlways = NSString(string: SecConstants.kSecAttrAccessibleAlways)\n"
        #expect(KeychainLinter.lint(source: definition, file: "A.swift").isEmpty, "a deprecated declaration naming another, as the compiler lets pass")
    }

    @Test("a delete in the branch of a -25308 read: if, switch and catch")
    func deleteAfterLockedRead() {
        #expect(
            found(
                """
                func load() {
                    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "t"]
                    var result: AnyObject?
                    let status = SecItemCopyMatching(query as CFDictionary, &result)
                    if status == errSecInteractionNotAllowed {
                        SecItemDelete(query as CFDictionary)
                    }
                    switch status {
                    case -25308: SecItemDelete(query as CFDictionary)
                    case errSecItemNotFound: SecItemDelete(query as CFDictionary)
                    default: break
                    }
                }
                """) == ["6:deleteAfterLockedRead", "9:deleteAfterLockedRead"])
    }

    @Test("synchronizable with a ThisDeviceOnly class, on add and in an update's changes")
    func synchronizableThisDeviceOnly() {
        #expect(
            found(
                """
                func save(_ data: Data) {
                    let item: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecValueData: data,
                        kSecAttrSynchronizable: kCFBooleanTrue!, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]
                    if SecItemAdd(item as CFDictionary, nil) == errSecDuplicateItem {}
                    let changes: [CFString: Any] = [kSecAttrSynchronizable: true, kSecAttrAccessible: kSecAttrAccessibleWhenUnlockedThisDeviceOnly]
                    _ = SecItemUpdate([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "a"] as CFDictionary, changes as CFDictionary)
                }
                """) == ["4:synchronizableThisDeviceOnly", "6:synchronizableThisDeviceOnly"])
    }

    @Test("an add whose status is dropped, unless the code deletes first or handles -25299")
    func unhandledDuplicate() {
        #expect(
            found(
                """
                func save(item: [String: Any]) {
                    SecItemAdd(item as CFDictionary, nil)
                }
                func replace(item: [String: Any], query: [String: Any]) {
                    SecItemDelete(query as CFDictionary)
                    SecItemAdd(item as CFDictionary, nil)
                }
                func upsert(item: [String: Any]) {
                    let status = SecItemAdd(item as CFDictionary, nil)
                    if status == errSecDuplicateItem { }
                }
                func ignore(item: [String: Any]) {
                    _ = SecItemAdd(item as CFDictionary, nil)
                }
                """) == ["2:unhandledDuplicate", "13:unhandledDuplicate"])
    }

    @Test("calls on the main actor: a @MainActor type or function, MainActor.run, DispatchQueue.main; not an actor's or a detached task's")
    func mainThreadCall() {
        #expect(
            found(
                """
                @MainActor
                final class Model {
                    func load(_ q: CFDictionary) { _ = SecItemCopyMatching(q, nil) }
                    nonisolated func loadOff(_ q: CFDictionary) { _ = SecItemCopyMatching(q, nil) }
                    func later(_ q: CFDictionary) { Task.detached { _ = SecItemCopyMatching(q, nil) } }
                    func soon(_ q: CFDictionary) { Task { _ = SecItemCopyMatching(q, nil) } }
                }
                actor Store {
                    func load(_ q: CFDictionary) { _ = SecItemCopyMatching(q, nil) }
                }
                func refresh(_ q: CFDictionary) async {
                    await MainActor.run { _ = SecItemCopyMatching(q, nil) }
                    DispatchQueue.main.async { _ = SecItemCopyMatching(q, nil) }
                    DispatchQueue.global().async { _ = SecItemCopyMatching(q, nil) }
                }
                @MainActor func tap(_ q: CFDictionary) { _ = SecItemCopyMatching(q, nil) }
                """) == ["3:mainThreadCall", "6:mainThreadCall", "12:mainThreadCall", "13:mainThreadCall", "16:mainThreadCall"])
    }

    @Test("the seeds' checklists: a secret in UserDefaults, a credential in the source, a cleanup that leaves synced items")
    func checklists() {
        #expect(
            found(
                """
                func f(token: String) {
                    UserDefaults.standard.set(token, forKey: "session_token")
                    UserDefaults.standard.set(true, forKey: "hasLaunchedBefore")
                    let pixarAPIKey = "sk-pixar-prod-abc123xyz"
                    let clientSecret = "hunter2hunter2"
                    let greeting = "hello world, this is long"
                    let passwordVariable = "PGPASSWORD"
                    let tokenKey = "com.example.auth.token"
                    for itemClass in [kSecClassGenericPassword, kSecClassKey] {
                        SecItemDelete([kSecClass: itemClass] as CFDictionary)
                        SecItemDelete([kSecClass: itemClass, kSecAttrSynchronizable: kSecAttrSynchronizableAny] as CFDictionary)
                        SecItemDelete([kSecClass: itemClass, kSecAttrAccount: "a"] as CFDictionary)
                    }
                }
                """) == ["2:secretInUserDefaults", "4:hardcodedSecret", "5:hardcodedSecret", "10:cleanupMissesSyncedItems"])
    }

    /// The repository's samples: app code as the seeds and wrappers write it.
    static let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("..")

    func lintSample(_ path: String) throws -> [String] {
        let url = Self.samples.appendingPathComponent(path)
        return KeychainLinter.lint(source: try String(contentsOf: url, encoding: .utf8), file: path).map { "\($0.line):\($0.rule.name)" }
    }

    @Test("the seeds' own code: each trap the seeds call wrong is found, the code they call right is clean")
    func seedsSnippets() throws {
        // Seed 002: the token in UserDefaults, the key in the source, and a KeychainManager whose
        // add sets no accessibility (the seed relies on the default).
        #expect(
            try lintSample("FoundationOverlayTests/Samples/Seed002.swift") == [
                "21:secretInUserDefaults", "26:hardcodedSecret", "69:noAccessibilityOnAdd",
            ])
        // Seed 000: its dangerous migration adds without accessibility; its cleanup names
        // kSecAttrSynchronizableAny, as the seed says it must.
        #expect(try lintSample("FoundationOverlayTests/Samples/Seed000.swift") == ["147:noAccessibilityOnAdd"])
        // Seed 004's "❌ WRONG" view model, and its actor that is right.
        #expect(try lintSample("KeyferryTestingTests/Samples/SettingsViewModel.swift") == ["33:mainThreadCall"])
        #expect(try lintSample("KeyferryTestingTests/Samples/KeychainManager.swift") == [])
        // The README's wrapper, at the line the audit names when its test runs.
        #expect(try lintSample("KeyferryTestingTests/Samples/TokenStore.swift") == ["14:noAccessibilityOnAdd"])
        // The wrappers' patterns (AppleTypesTests): the Always class stored through a function
        // value, which the audit can only call "(a call through a function value)", is named by
        // its line; the [String: AnyObject] and NSDictionary shapes read clean.
        #expect(try lintSample("KeyferrySecurityTests/AppleTypesTests.swift") == ["33:deprecatedAlways"])
        // The field reports' migration that deletes before it writes.
        #expect(try lintSample("KeyferryTestingTests/Samples/LegacyMigration.swift") == ["66:noAccessibilityOnAdd", "66:unhandledDuplicate"])
    }
}
