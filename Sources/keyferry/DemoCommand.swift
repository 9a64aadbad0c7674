import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore

/// A short tour on one simulated iPhone of the rules the iOS Simulator does not enforce.
/// Time is simulated, so the grace period passes instantly and every run prints the same story.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run a short demo: a simulated iPhone, its keychain, and what lock, reboot and passcode changes do to it.")

    @Option(help: "Keep the demo device in this directory (it must not exist yet, or be empty) instead of a temporary one.")
    var dir: String?

    func validate() throws {
        if let dir, let contents = try? FileManager.default.contentsOfDirectory(atPath: dir), !contents.isEmpty {
            throw ValidationError("\(dir) is not empty; give --dir a new directory for the demo device.")
        }
    }

    func run() throws {
        let root = URL(fileURLWithPath: dir ?? FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-demo-\(UUID().uuidString)").path)
        defer { if dir == nil { try? FileManager.default.removeItem(at: root) } }
        let clock = ManualClock()
        let tour = Tour()

        tour.heading("A fleet of one: Alice's iPhone")
        let phone = try Device.create(at: root, options: DeviceOptions(name: "Alice's iPhone", passcode: "123456", enrollBiometry: true, gracePeriod: 10), clock: clock)
        let mail = AppManifest(bundleID: "com.example.mail", teamID: "ABCDE12345", accessGroups: ["ABCDE12345.shared"])
        let widget = AppManifest(bundleID: "com.example.mail.widget", teamID: "ABCDE12345", accessGroups: ["ABCDE12345.shared"])
        try phone.install(mail)
        try phone.install(widget)
        tour.say("device   \(phone.info.name), passcode set, Face ID enrolled, grace period 10 s")
        tour.say("apps     \(mail.bundleID) and \(widget.bundleID), sharing ABCDE12345.shared")
        tour.say("stored   \(root.path)")

        tour.heading("The mail app stores its secrets")
        let keychain = try phone.keychain(for: mail.bundleID)
        let vaultControl = try AccessControl(protection: .whenPasscodeSetThisDeviceOnly, expression: "biometryCurrentSet|or|devicePasscode")
        let items: [(String, NewItem)] = [
            ("session-token", .generic("session-token", protection: .whenUnlocked)),
            ("push-key", .generic("push-key", protection: .afterFirstUnlockThisDeviceOnly)),
            ("imap password", NewItem(.internetPassword, attributes: [.server: .string("imap.example.com"), .account: .string("alice"), .protocol: .string("imap")],
                                      data: Data("imap-secret".utf8), protection: .afterFirstUnlock, synchronizable: true)),
            ("vault-key", NewItem(.genericPassword, attributes: [.account: .string("vault-key")], data: Data("vault-secret".utf8), accessControl: vaultControl)),
            ("legacy-pin", .generic("legacy-pin", protection: .always)),
        ]
        for (name, item) in items {
            tour.attempt("add \(name.padding(toLength: 14, withPad: " ", startingAt: 0)) \(item.protectionName)") { try keychain.add(item) }
        }
        try phone.sandbox(for: mail.bundleID).set("alice@example.com", forKey: "signedInUser")
        tour.say("UserDefaults: signedInUser = alice@example.com (a plaintext property list in the sandbox)")
        tour.attempt("the widget reads session-token through the shared group") {
            _ = try phone.keychain(for: widget.bundleID).copy(.generic("session-token"))
        }
        tour.attempt("add session-token again as afterFirstUnlock (phantom mismatch)") {
            try keychain.add(.generic("session-token", protection: .afterFirstUnlock))
        }

        tour.heading("Alice locks the phone")
        try phone.lock()
        clock.advance(by: 5)
        tour.attempt("5 s later, read session-token (grace period)") { _ = try keychain.copy(.generic("session-token")) }
        clock.advance(by: 6)
        tour.attempt("11 s later, read session-token") { _ = try keychain.copy(.generic("session-token")) }
        tour.attempt("a push extension reads push-key") { _ = try keychain.copy(.generic("push-key")) }
        tour.say("isProtectedDataAvailable = \(phone.isProtectedDataAvailable)")

        tour.heading("The phone reboots: before first unlock")
        try phone.reboot()
        tour.attempt("read push-key") { _ = try keychain.copy(.generic("push-key")) }
        tour.attempt("read legacy-pin (always)") { _ = try keychain.copy(.generic("legacy-pin")) }
        let defaults = try phone.sandbox(for: mail.bundleID).defaults()
        tour.say("a pre-warmed launch reads UserDefaults: \(defaults.isEmpty ? "empty, so the app thinks nobody is signed in" : "\(defaults)")")
        tour.attempt("unlock with a wrong passcode") { try phone.unlock(passcode: "000000") }
        tour.attempt("unlock with 123456") { try phone.unlock(passcode: "123456") }

        tour.heading("Face ID and the passcode change")
        tour.attempt("read vault-key with Face ID") { _ = try keychain.copy(.generic("vault-key", authentication: .responding(.biometryMatch))) }
        try phone.changeBiometryEnrollment()
        tour.say("a new face is enrolled")
        tour.attempt("read vault-key with Face ID") { _ = try keychain.copy(.generic("vault-key", authentication: .responding(.biometryMatch))) }
        tour.attempt("read vault-key with the passcode") { _ = try keychain.copy(.generic("vault-key", authentication: .responding(.passcode("123456")))) }
        try phone.removePasscode(current: "123456")
        tour.say("Alice removes her passcode")
        tour.attempt("read vault-key") { _ = try keychain.copy(.generic("vault-key", authentication: .responding(.passcode("123456")))) }

        tour.heading("What is on disk")
        let secrets = ["session", "push", "imap-secret", "vault-secret", "legacy-pin"].map { Data($0.utf8) }
        var files = 0, hits = 0
        for case let url as URL in FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) ?? .init() {
            guard let bytes = try? Data(contentsOf: url), !url.hasDirectoryPath else { continue }
            files += 1
            if url.pathComponents.contains("apps") { continue } // the sandbox is the app's own plaintext
            hits += secrets.filter { bytes.range(of: $0) != nil }.count
        }
        tour.say("\(files) files; keychain secrets found in plaintext outside app sandboxes: \(hits)")
        tour.say("(the sandbox's UserDefaults stays plaintext, as on iOS: a legacy store is not a keychain)")
        if dir != nil { tour.say("The device stays in \(root.path).") }
    }
}

/// Prints the demo's story: headings, sentences and the outcome of each keychain call.
struct Tour {
    func heading(_ text: String) { print("\n== \(text)") }
    func say(_ text: String) { print("   \(text)") }

    func attempt(_ label: String, _ body: () throws -> Void) {
        let outcome: String
        do {
            try body()
            outcome = "ok"
        } catch let error as KeychainError {
            outcome = error.status.description
        } catch {
            outcome = "\(error)"
        }
        let width = 72
        print("   \(label.count < width ? label.padding(toLength: width, withPad: " ", startingAt: 0) : label + "  ")\(outcome)")
    }
}

extension NewItem {
    static func generic(_ account: String, protection: ProtectionClass) -> NewItem {
        NewItem(.genericPassword, attributes: [.account: .string(account)], data: Data("\(account)-secret".utf8), protection: protection)
    }

    var protectionName: String {
        let protection = accessControl?.protection ?? self.protection ?? itemClass.defaultProtection
        var text = protection.name
        if let accessControl, accessControl.requiresAuthentication { text += " + \(accessControl.expression)" }
        if synchronizable { text += ", synchronizable" }
        return text
    }
}

extension ItemQuery {
    static func generic(_ account: String, authentication: AuthenticationContext = .noInteraction) -> ItemQuery {
        ItemQuery(.genericPassword, attributes: [.account: .string(account)], returning: .data, authentication: authentication)
    }
}
