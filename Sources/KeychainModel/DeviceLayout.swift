public import Foundation

/// Where a device keeps each thing inside its directory: one list of its files, for the store
/// that owns them and for the clients that only look.
public struct DeviceLayout: Sendable {
    public let root: URL
    public init(root: URL) { self.root = root }

    public var info: URL { root.appendingPathComponent("device.json") }
    /// The simulated hardware UID: 32 random bytes, owner-only, never copied anywhere.
    public var hardwareUID: URL { root.appendingPathComponent("hardware-uid") }
    public var database: URL { root.appendingPathComponent("keychain.db") }
    /// When the device last made a backup of itself (`Device.recordBackup`).
    public var lastBackup: URL { root.appendingPathComponent("last-backup.json") }
    public var apps: URL { root.appendingPathComponent("apps") }

    public func sandbox(_ bundleID: String) -> URL { apps.appendingPathComponent(bundleID) }
    public func defaultsFile(_ bundleID: String) -> URL {
        sandbox(bundleID).appendingPathComponent("Library/Preferences/\(bundleID).plist")
    }
    public func documents(_ bundleID: String) -> URL { sandbox(bundleID).appendingPathComponent("Documents") }
    /// An app group's shared container: its files, and its UserDefaults suite in
    /// `Library/Preferences/GROUP.plist`, as on iOS.
    public func groupContainer(_ group: String) -> URL { groups.appendingPathComponent(group) }
    public var groups: URL { root.appendingPathComponent("groups") }
    public func groupDefaultsFile(_ group: String) -> URL {
        groupContainer(group).appendingPathComponent("Library/Preferences/\(group).plist")
    }

    /// Held locked by whoever has the device powered on (a node, a restore): a second holder
    /// fails on it.
    public var lock: URL { root.appendingPathComponent("node.lock") }
    /// The control API of the device's node (owner-only).
    public var socket: URL { root.appendingPathComponent("node.sock") }
    /// What the node did, without secrets.
    public var log: URL { root.appendingPathComponent("node.log") }
    /// What the device remembers of its sync circle, beside its keychain.
    public var syncState: URL { root.appendingPathComponent("sync.json") }
    /// The Keychain Services calls the audit recorded (`keyferry audit`).
    public var auditLog: URL { root.appendingPathComponent("audit.jsonl") }

    /// Fails with `notADevice` unless the directory holds a device (its `device.json`). A look
    /// only: what a cut restore left is put right by whoever takes the device.
    public func requireDevice() throws {
        guard FileManager.default.fileExists(atPath: info.path) else {
            throw DeviceError(.notADevice, "\(root.path) is not a Keyferry device (no device.json).", subject: root.path)
        }
    }
}
