import Foundation
import KeychainModel
import KeychainStore
import NodeControl

/// Where a context's calls go: a device powered on in this process, or a running node.
/// Either way the calls are the typed ones; only the transport differs.
protocol KeychainBackend: Sendable {
    /// The device's directory.
    var directory: URL { get }
    func add(_ item: NewItem, app: String) throws -> ItemRecord
    /// A certificate and its private key, in one transaction.
    func addIdentity(certificate: NewItem, privateKey: NewItem, app: String) throws
    func copy(_ query: ItemQuery, app: String) throws -> [ItemRecord]
    func update(_ query: ItemQuery, with changes: ItemChanges, app: String) throws
    func delete(_ query: ItemQuery, app: String) throws
    /// Passcode and biometry, as `LAContext` sees them.
    func status() throws -> DeviceStatus

    // The app's sandbox, as its own code reaches it; with `group`, the app group's container.
    /// Every UserDefaults entry; nil while they cannot be read (before first unlock).
    func defaults(app: String, group: String?) throws -> [String: Any]?
    /// Sets entries and removes keys; refused while UserDefaults cannot be written.
    func changeDefaults(set: [String: Any], remove: [String], app: String, group: String?) throws
    /// A file under Documents (or in the group's container), by its path there; refused while
    /// its class is unavailable.
    func readFile(_ path: String, app: String, group: String?) throws -> Data
    func writeFile(_ path: String, _ contents: Data, protection: FileProtection, app: String, group: String?) throws
    func removeFile(_ path: String, app: String, group: String?) throws
    /// The app groups the app is entitled to.
    func appGroups(app: String) throws -> [String]
}

/// A `Device` in this process: what `KeyferryTesting` makes, or a device directory no node runs.
struct InProcessBackend: KeychainBackend {
    let device: Device
    var directory: URL { device.directory }

    func add(_ item: NewItem, app: String) throws -> ItemRecord { try device.keychain(for: app).add(item) }
    func addIdentity(certificate: NewItem, privateKey: NewItem, app: String) throws {
        try device.keychain(for: app).addIdentity(certificate: certificate, privateKey: privateKey)
    }
    func copy(_ query: ItemQuery, app: String) throws -> [ItemRecord] { try device.keychain(for: app).copy(query) }
    func update(_ query: ItemQuery, with changes: ItemChanges, app: String) throws {
        _ = try device.keychain(for: app).update(query, with: changes)
    }
    func delete(_ query: ItemQuery, app: String) throws { _ = try device.keychain(for: app).delete(query) }
    func status() throws -> DeviceStatus { try device.status() }

    func defaults(app: String, group: String?) throws -> [String: Any]? {
        let sandbox = try device.sandbox(for: app, group: group)
        return sandbox.defaultsAreReadable ? try sandbox.defaults() : nil
    }

    func changeDefaults(set: [String: Any], remove: [String], app: String, group: String?) throws {
        let sandbox = try device.sandbox(for: app, group: group)
        for (key, value) in set.sorted(by: { $0.key < $1.key }) { try sandbox.set(value, forKey: key) }
        for key in remove { try sandbox.set(nil, forKey: key) }
    }

    func readFile(_ path: String, app: String, group: String?) throws -> Data { try device.sandbox(for: app, group: group).readFile(path) }
    func writeFile(_ path: String, _ contents: Data, protection: FileProtection, app: String, group: String?) throws {
        try device.sandbox(for: app, group: group).writeFile(path, contents, protection: protection)
    }
    func removeFile(_ path: String, app: String, group: String?) throws { try device.sandbox(for: app, group: group).removeFile(path) }
    func appGroups(app: String) throws -> [String] { try device.app(app).appGroups }
}

/// A running node, reached over its socket; each call waits on the calling thread.
struct NodeBackend: KeychainBackend {
    let client: NodeClient
    var directory: URL { client.paths.directory }

    func add(_ item: NewItem, app: String) throws -> ItemRecord {
        let answer: NodeAPI.Items = try client.callSynchronously(.add, NodeAPI.Add(app: app, item: item))
        guard let record = answer.items.first else { throw KeychainError(.internalError, "the node added the item but answered no record.") }
        return record
    }

    func addIdentity(certificate: NewItem, privateKey: NewItem, app: String) throws {
        let _: NodeAPI.Items = try client.callSynchronously(.add, NodeAPI.Add(app: app, item: certificate, privateKey: privateKey))
    }

    func copy(_ query: ItemQuery, app: String) throws -> [ItemRecord] {
        let answer: NodeAPI.Items = try client.callSynchronously(.copy, NodeAPI.Search(app: app, query: query))
        return answer.items
    }

    func update(_ query: ItemQuery, with changes: ItemChanges, app: String) throws {
        let _: NodeAPI.Changed = try client.callSynchronously(.update, NodeAPI.Update(app: app, query: query, changes: changes))
    }

    func delete(_ query: ItemQuery, app: String) throws {
        let _: NodeAPI.Changed = try client.callSynchronously(.delete, NodeAPI.Search(app: app, query: query))
    }

    func status() throws -> DeviceStatus {
        let answer: NodeAPI.NodeStatus = try client.getSynchronously(.status)
        return answer.device
    }

    func defaults(app: String, group: String?) throws -> [String: Any]? {
        try defaults(NodeAPI.DefaultsPlist(bundleID: app, group: group))
    }

    func changeDefaults(set: [String: Any], remove: [String], app: String, group: String?) throws {
        let plist = set.isEmpty ? nil : try PropertyListSerialization.data(fromPropertyList: set, format: .binary, options: 0)
        _ = try defaults(NodeAPI.DefaultsPlist(bundleID: app, set: plist, remove: remove, group: group))
    }

    private func defaults(_ request: NodeAPI.DefaultsPlist) throws -> [String: Any]? {
        let answer: NodeAPI.DefaultsPlistContents = try client.callSynchronously(.defaultsPlist, request)
        return try answer.plist.map { try PropertyListSerialization.propertyList(from: $0, format: nil) as? [String: Any] ?? [:] }
    }

    func readFile(_ path: String, app: String, group: String?) throws -> Data {
        let answer: NodeAPI.FileContents = try client.callSynchronously(.file, NodeAPI.File(bundleID: app, path: path, group: group))
        return answer.contents ?? Data()
    }

    func writeFile(_ path: String, _ contents: Data, protection: FileProtection, app: String, group: String?) throws {
        let _: NodeAPI.FileContents = try client.callSynchronously(
            .file, NodeAPI.File(bundleID: app, path: path, contents: contents, protection: protection, group: group))
    }

    func removeFile(_ path: String, app: String, group: String?) throws {
        let _: NodeAPI.FileContents = try client.callSynchronously(.file, NodeAPI.File(bundleID: app, path: path, remove: true, group: group))
    }

    func appGroups(app: String) throws -> [String] {
        let apps: [AppManifest] = try client.getSynchronously(.apps)
        guard let manifest = apps.first(where: { $0.bundleID == app }) else {
            throw KeychainError(.notAvailable, "\(app) is not installed on the node.")
        }
        return manifest.appGroups
    }
}
