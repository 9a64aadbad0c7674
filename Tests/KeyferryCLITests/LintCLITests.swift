import Foundation
import KeychainTesting
import Testing

/// `keyferry lint` as a CI job runs it: the installed binary and keyferry-lint beside it.
@Suite("keyferry lint on the command line", .blocking)
struct LintCLITests {
    @Test(
        "a tree: its Swift files in path order, hidden directories left out; a clean tree exits 0, one trap exits 1 with file and line; nothing to read is clean"
    )
    func tree() throws {
        let cli = try CLI()
        let sources = cli.root.appendingPathComponent("App")
        try FileManager.default.createDirectory(at: sources.appendingPathComponent(".build/x"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: sources.appendingPathComponent("Model"), withIntermediateDirectories: true)
        let clean = """
            func save(_ data: Data) -> OSStatus {
                let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecValueData as String: data,
                                           kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]
                return SecItemAdd(item as CFDictionary, nil)
            }

            """
        try Data(clean.utf8).write(to: sources.appendingPathComponent("Model/Store.swift"))
        try Data("let key = kSecAttrAccessibleAlways\n".utf8).write(to: sources.appendingPathComponent(".build/x/Generated.swift"))
        try Data("not swift".utf8).write(to: sources.appendingPathComponent("README.md"))

        let ok = try cli.run(["lint", sources.path])
        #expect(ok.status == 0 && ok.text == "no keychain traps in 1 file.\n", "\(ok.text)\(ok.stderr)")

        try Data("let key = kSecAttrAccessibleAlways\n".utf8).write(to: sources.appendingPathComponent("Legacy.swift"))
        let found = try cli.run(["lint", sources.path, "--json"])
        #expect(found.status == 1)
        let report = try found.object()
        #expect(report["files"] as? Int == 2)
        let findings = try #require(report["findings"] as? [[String: Any]])
        #expect(findings.map { "\($0["file"] ?? ""):\($0["line"] ?? ""):\($0["rule"] ?? "")" } == ["\(sources.path)/Legacy.swift:1:deprecatedAlways"])
        #expect((findings.first?["why"] as? String)?.contains("deprecated since iOS 12") == true)

        let empty = cli.root.appendingPathComponent("Empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        let none = try cli.run(["lint", empty.path])
        #expect(none.status == 0 && none.text == "no keychain traps in 0 files.\n", "\(none.text)\(none.stderr)")
    }
}
