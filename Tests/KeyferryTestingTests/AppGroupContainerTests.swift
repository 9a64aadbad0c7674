import Foundation
import KeyferryTesting
import Testing

/// App code sharing through an app group, as it does on iOS: `containerURL(forSecurityApplicationGroupIdentifier:)`
/// and `UserDefaults(suiteName:)`, between an app and its widget.
@Suite("App groups in app code")
struct AppGroupContainerTests {
    static let group = "group.com.example.notes"
    let phone: SimulatedDevice
    let app: KeyferryContext
    let widget: KeyferryContext

    init() throws {
        phone = try SimulatedDevice()
        app = try phone.install("com.example.notes", accessGroups: [Self.group])
        widget = try phone.install("com.example.notes.widget", accessGroups: [Self.group], extensionOf: "com.example.notes")
    }

    @Test("the widget reads what the app wrote to the group's suite and container; an app outside the group gets no container")
    func sharing() throws {
        app.run {
            app.userDefaults(suiteName: Self.group)?.set("alice", forKey: "signedInUser")
            let container = app.fileManager.containerURL(forSecurityApplicationGroupIdentifier: Self.group)
            let url = container?.appendingPathComponent("timeline.json")
            #expect(app.fileManager.createFile(atPath: url?.path ?? "", contents: Data("[1]".utf8)))
        }
        widget.run {
            #expect(widget.userDefaults(suiteName: Self.group)?.string(forKey: "signedInUser") == "alice")
            #expect(widget.userDefaults.string(forKey: "signedInUser") == nil, "the widget's standard defaults are its own")
            let url = widget.fileManager.containerURL(forSecurityApplicationGroupIdentifier: Self.group)?.appendingPathComponent("timeline.json")
            #expect(widget.fileManager.contents(atPath: url?.path ?? "") == Data("[1]".utf8))
        }
        let other = try phone.install("com.example.other")
        other.run {
            #expect(other.fileManager.containerURL(forSecurityApplicationGroupIdentifier: Self.group) == nil)
            // A suite of a group the app is not in shares nothing.
            other.userDefaults(suiteName: Self.group)?.set("mallory", forKey: "signedInUser")
            #expect(other.lastFailure?.contains("not entitled to the app group") == true, "\(other.lastFailure ?? "")")
            #expect(other.userDefaults(suiteName: Self.group)?.string(forKey: "signedInUser") == nil)
        }
        widget.run { #expect(widget.userDefaults(suiteName: Self.group)?.string(forKey: "signedInUser") == "alice") }
    }

    @Test("a widget launched before the first unlock reads the suite back empty")
    func beforeFirstUnlock() throws {
        app.run { app.userDefaults(suiteName: Self.group)?.set("alice", forKey: "signedInUser") }
        try phone.reboot()
        widget.run { #expect(widget.userDefaults(suiteName: Self.group)?.string(forKey: "signedInUser") == nil) }
        try phone.unlock()
        widget.run { #expect(widget.userDefaults(suiteName: Self.group)?.string(forKey: "signedInUser") == "alice") }
    }
}
