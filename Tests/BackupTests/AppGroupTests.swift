import Backup
import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

/// App groups: a shared container (files and a UserDefaults suite) that an app and its
/// extensions reach, counted by the apps entitled to it, carried by backups and Quick Start.
@Suite("App group containers")
struct AppGroupTests {
    static let group = "group.com.example.shared"
    static let widget = "com.example.app.widget"

    private func fixture() throws -> TestDevice {
        try TestDevice(apps: [
            AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID, accessGroups: [Self.group]),
            AppManifest(bundleID: Self.widget, teamID: TestDevice.teamID, accessGroups: [Self.group]),
            AppManifest(bundleID: "com.example.other", teamID: TestDevice.teamID),
        ])
    }

    @Test("an app and its widget share the group's suite and files; an app without the entitlement is refused")
    func sharing() throws {
        let t = try fixture()
        let app = try t.device.groupContainer(Self.group, for: TestDevice.appID)
        try app.set("alice", forKey: "signedInUser")
        try app.writeFile("session.json", Data("{}".utf8), protection: .complete)
        let widget = try t.device.groupContainer(Self.group, for: Self.widget)
        #expect(try widget.string(forKey: "signedInUser") == "alice")
        #expect(try widget.readFile("session.json") == Data("{}".utf8))
        #expect(try t.device.sandbox(for: Self.widget).string(forKey: "signedInUser") == nil, "the widget's own defaults are its own")
        #expect(throws: DeviceError.self) { try t.device.groupContainer(Self.group, for: "com.example.other") }
        #expect(throws: DeviceError.self) { try app.writeFile("Library/Preferences/x.plist", Data()) }
    }

    @Test("the group's suite reads back empty before first unlock, and its complete files while locked, for the widget as for the app")
    func protection() throws {
        let t = try fixture()
        let app = try t.device.groupContainer(Self.group, for: TestDevice.appID)
        try app.set("alice", forKey: "signedInUser")
        try app.writeFile("vault.db", Data("v".utf8), protection: .complete)
        try t.device.lock(immediately: true)
        t.clock.advance(by: 60)
        let widget = try t.device.groupContainer(Self.group, for: Self.widget)
        #expect(throws: DeviceError.self) { try widget.readFile("vault.db") }
        #expect(try widget.string(forKey: "signedInUser") == "alice")
        try t.device.reboot()
        #expect(try widget.defaults().isEmpty && !widget.defaultsAreReadable, "before first unlock the suite reads back empty")
    }

    @Test("the container stays while an app of the group remains, and goes with the last one")
    func lifecycle() throws {
        let t = try fixture()
        try t.device.groupContainer(Self.group, for: TestDevice.appID).set("alice", forKey: "signedInUser")
        try t.device.uninstall(bundleID: TestDevice.appID)
        #expect(try t.device.groupContainer(Self.group, for: Self.widget).string(forKey: "signedInUser") == "alice")
        try t.device.uninstall(bundleID: Self.widget)
        #expect(try t.device.groupContainers().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: DeviceLayout(root: t.directory).groupContainer(Self.group).path))
        try t.device.install(AppManifest(bundleID: Self.widget, teamID: TestDevice.teamID, accessGroups: [Self.group]))
        #expect(try t.device.groupContainer(Self.group, for: Self.widget).defaults().isEmpty, "a new install finds a new container")
        #expect(throws: DeviceError.self) { try t.device.install(AppManifest(bundleID: Self.group, teamID: TestDevice.teamID)) }
    }

    @Test("an extension installs after its app, cannot be removed alone, and goes with it; the group's container with them")
    func extensions() throws {
        let t = try TestDevice(apps: [AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID, accessGroups: [Self.group])])
        let widget = AppManifest(bundleID: Self.widget, teamID: TestDevice.teamID, accessGroups: [Self.group], containingApp: TestDevice.appID)
        #expect(throws: DeviceError.self) {
            try t.device.install(AppManifest(bundleID: "com.example.widget", teamID: TestDevice.teamID, containingApp: TestDevice.appID))
        }
        try t.device.install(widget)
        #expect(throws: DeviceError.self) {
            try t.device.install(AppManifest(bundleID: "\(Self.widget).inner", teamID: TestDevice.teamID, containingApp: Self.widget))
        }
        try t.device.groupContainer(Self.group, for: Self.widget).set("alice", forKey: "signedInUser")
        let alone = #expect(throws: DeviceError.self) { try t.device.uninstall(bundleID: Self.widget) }
        #expect(alone?.message.contains("goes when \(TestDevice.appID) is uninstalled") == true)
        try t.device.uninstall(bundleID: TestDevice.appID)
        #expect(try t.device.installedApps().isEmpty && t.device.groupContainers().isEmpty)
        #expect(throws: DeviceError.self) { try t.device.install(widget) }
    }

    @Test("a backup carries the container, in every archive, and a restore onto a new device puts it back")
    func backup() throws {
        let t = try fixture()
        let app = try t.device.groupContainer(Self.group, for: TestDevice.appID)
        try app.set("alice", forKey: "signedInUser")
        try app.writeFile("Library/Application Support/store.sqlite", Data("rows".utf8))
        for encrypted in [true, false] {
            let url = t.directory.deletingLastPathComponent().appendingPathComponent("groups-\(encrypted).kfbackup")
            try DeviceBackup.create(from: t.device, to: url, mode: encrypted ? .encrypted(password: Data("pw".utf8), parameters: .minimum) : .unencrypted)
            let target = try TestDevice(seed: 9, apps: [])
            target.device.powerOff()
            let report = try DeviceRestore.restore(
                url, password: encrypted ? Data("pw".utf8) : nil, to: target.directory, passcode: TestDevice.defaultPasscode,
                acceptingUnauthenticated: !encrypted)
            #expect(report.sandboxFiles == 2, "the suite and the file: the apps wrote no defaults of their own")
            let restored = try Device.powerOn(at: target.directory)
            defer { restored.powerOff() }
            try restored.unlock(passcode: TestDevice.defaultPasscode)
            let container = try restored.groupContainer(Self.group, for: Self.widget)
            #expect(try container.string(forKey: "signedInUser") == "alice")
            #expect(try container.readFile("Library/Application Support/store.sqlite") == Data("rows".utf8))
        }
    }
}
