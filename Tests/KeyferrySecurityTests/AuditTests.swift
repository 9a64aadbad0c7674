import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferrySecurity
import Testing

/// The traps of the seeds, found in calls as app code makes them, with the caller's file and line.
@Suite("Audit of keychain traps")
struct AuditTests {
    let t: TestDevice
    let context: KeyferryContext

    init() throws {
        t = try TestDevice()
        context = KeyferryContext(device: t.device, app: TestDevice.appID, passcode: t.passcode)
    }

    let service = "com.example.app"

    func findings() throws -> [AuditReport.Finding] {
        context.flushAudit()
        return try context.audit.read().findings
    }

    @Test("code written the recommended way records nothing")
    func cleanCode() throws {
        context.run {
            let item: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "alice", kSecValueData as String: Data("1".utf8),
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
            ]
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: "alice",
            ]
            // Add-or-update: the duplicate is handled.
            if SecItemAdd(item as CFDictionary, nil) == errSecDuplicateItem {
                #expect(SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data("2".utf8)] as CFDictionary) == errSecSuccess)
            }
            var result: CFTypeRef?
            #expect(SecItemCopyMatching(query.merging([kSecReturnData as String: true]) { $1 } as CFDictionary, &result) == errSecSuccess)
            #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
        }
        #expect(try findings().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: context.audit.file.path))
    }

    @Test("each single-call trap is recorded at the caller's file and line, with why")
    func singleCallTraps() throws {
        var lines: [KeychainTrap: Int] = [:]
        context.run {
            lines[.noAccessibilityOnAdd] = #line + 1
            SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"] as CFDictionary, nil)
            lines[.deprecatedAlways] = #line + 1
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "b",
                    kSecAttrAccessible: kSecAttrAccessibleAlways,
                ] as CFDictionary, nil)
            lines[.synchronizableThisDeviceOnly] = #line + 1
            SecItemAdd(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "c", kSecAttrSynchronizable: true,
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                ] as CFDictionary, nil)
            var result: CFTypeRef?
            lines[.accessibilityInSearch] = #line + 1
            let status = SecItemCopyMatching(
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a",
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                ] as CFDictionary, &result)
            // The phantom mismatch of the seeds: stored WhenUnlocked, searched AfterFirstUnlock.
            #expect(status == errSecItemNotFound)
        }
        let found = try findings()
        #expect(Set(found.map(\.trap)) == Set(lines.keys))
        for finding in found {
            #expect(finding.file == "KeyferrySecurityTests/AuditTests.swift")
            #expect(finding.line == lines[finding.trap])
            #expect(finding.apps == [TestDevice.appID])
            #expect(finding.why == finding.trap.why)
        }
        #expect(found.first { $0.trap == .accessibilityInSearch }?.detail == "searches with kSecAttrAccessibleAfterFirstUnlock")
        #expect(found.first { $0.trap == .deprecatedAlways }?.detail == "stores with kSecAttrAccessibleAlways")
    }

    @Test("Always in an update's changes is a trap; accessibility in the changes is not")
    func updateChanges() throws {
        context.run {
            let query = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"]
            SecItemAdd(query.merging([kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked]) { $1 } as CFDictionary, nil)
            SecItemUpdate(query as CFDictionary, [kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock] as CFDictionary)
            SecItemUpdate(query as CFDictionary, [kSecAttrAccessible: kSecAttrAccessibleAlwaysThisDeviceOnly] as CFDictionary)
        }
        let found = try findings()
        #expect(found.map(\.trap) == [.deprecatedAlways])
        #expect(found.first?.function == .update)
        #expect(found.first?.detail == "stores with kSecAttrAccessibleAlwaysThisDeviceOnly")
    }

    @Test("a delete right after a read that failed with -25308, on a locked device, is recorded at the delete")
    func deleteAfterLockedRead() throws {
        var deleteLine = 0
        var readLine = 0
        let query: [String: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "token"]
        context.run {
            #expect(
                SecItemAdd(query.merging([kSecValueData: Data("t".utf8), kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked]) { $1 } as CFDictionary, nil)
                    == errSecSuccess)
        }
        try t.device.lock(immediately: true)
        context.run {
            var result: CFTypeRef?
            readLine = #line + 1
            let status = SecItemCopyMatching(query.merging([kSecReturnData: true]) { $1 } as CFDictionary, &result)
            #expect(status == errSecInteractionNotAllowed)
            // The seeds' "can't read? must be corrupted" anti-pattern.
            if status != errSecSuccess {
                deleteLine = #line + 1
                #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
            }
        }
        let found = try findings()
        #expect(found.map(\.trap) == [.deleteAfterLockedRead])
        #expect(found.first?.line == deleteLine)
        #expect(found.first?.detail == "the read at KeyferrySecurityTests/AuditTests.swift:\(readLine) got -25308")
    }

    @Test("a delete of another item after a locked read, or after a call in between, is not the trap")
    func unrelatedDelete() throws {
        context.failNext(.copyMatching, with: errSecInteractionNotAllowed)
        context.run {
            var result: CFTypeRef?
            SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"] as CFDictionary, &result)
            SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "b"] as CFDictionary)
        }
        #expect(try findings().isEmpty)
    }

    @Test("an add that fails -25299 is a trap unless an update or delete of the same item follows")
    func duplicates() throws {
        let item: [String: Any] = [
            kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a",
            kSecValueData: Data("1".utf8), kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
        ]
        var unhandled = 0
        context.run {
            SecItemAdd(item as CFDictionary, nil)
            // Handled by an update, after reading the item first.
            #expect(SecItemAdd(item as CFDictionary, nil) == errSecDuplicateItem)
            var result: CFTypeRef?
            SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"] as CFDictionary, &result)
            SecItemUpdate(
                [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"] as CFDictionary,
                [kSecValueData: Data("2".utf8)] as CFDictionary)
            // Not handled: the code moves on to another item.
            unhandled = #line + 1
            SecItemAdd(item as CFDictionary, nil)
            SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "other"] as CFDictionary)
            // Not handled, and the last call: found when the audit is read.
            SecItemAdd(item as CFDictionary, nil)
        }
        let found = try findings()
        #expect(found.map(\.trap) == [.unhandledDuplicate, .unhandledDuplicate])
        #expect(found.map(\.line) == [unhandled, unhandled + 3])
    }

    @Test("an injected status is what the caller gets, and what the audit sees")
    func injectedFaults() throws {
        context.failNext(.add, times: 2, with: errSecIO)
        context.run {
            let item =
                [
                    kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a",
                    kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                ] as CFDictionary
            #expect(SecItemAdd(item, nil) == errSecIO)
            #expect(SecItemAdd(item, nil) == errSecIO)
            #expect(SecItemAdd(item, nil) == errSecSuccess)
        }
        #expect(context.lastFailure?.contains("the test asked for it") == true)
        #expect(try t.keychain().copy(.password(account: "a")).count == 1)
    }

    @Test("the log groups calls by place and counts them; damaged lines are skipped; clear empties it")
    func logGroupsAndSurvivesDamage() throws {
        context.run {
            for _ in 0..<3 {
                SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: UUID().uuidString] as CFDictionary, nil)
            }
        }
        let handle = try FileHandle(forWritingTo: context.audit.file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"trap\": \"noAccessib".utf8))
        try handle.close()
        let report = try context.audit.read()
        #expect(report.findings.count == 1)
        #expect(report.findings.first?.count == 3)
        #expect(report.calls == 3)
        #expect(report.unreadableLines == 1)
        try context.audit.clear()
        #expect(try context.audit.read().calls == 0)
        try context.audit.clear()
    }

    @Test("the log stops growing at its capacity; the calls still succeed")
    func logIsBounded() throws {
        let big = Data(repeating: UInt8(ascii: "x"), count: AuditLog.capacity)
        try big.write(to: context.audit.file)
        context.run {
            #expect(SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: "a"] as CFDictionary, nil) == errSecSuccess)
        }
        #expect(try Data(contentsOf: context.audit.file).count == AuditLog.capacity)
    }
}
