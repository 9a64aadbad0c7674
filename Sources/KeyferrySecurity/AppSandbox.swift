public import Foundation
import KeychainModel
import KeychainStore

// The app's world beside the keychain, as its code reaches it: UserDefaults and the files under
// Documents, with iOS's protection classes. Foundation on Linux offers no hook into
// `UserDefaults.standard` or `Data.write(to:options:)`, so app code gets these through the
// context, as code that takes its `UserDefaults` and `FileManager` as parameters does.

extension KeyferryContext {
    /// The app's UserDefaults: its property list in the device's sandbox. Before the device's
    /// first unlock it reads back nothing but the registered defaults, and writes are lost, as
    /// on iOS (the file is protected until first user authentication); the context's
    /// `lastFailure` says so.
    public var userDefaults: UserDefaults { SandboxDefaults(context: self, group: nil) }

    /// `UserDefaults(suiteName: "group.…")`: an app group's suite in its shared container,
    /// which the app's extensions and the group's other apps read, with the same protection
    /// as the app's own (unreadable before first unlock). For a group the app is not entitled
    /// to, nothing is shared: reads find nothing and writes are lost, with `lastFailure` set
    /// (iOS keeps such a suite in the app's own sandbox, where no other process sees it).
    public func userDefaults(suiteName: String) -> UserDefaults? {
        guard AppManifest.isAppGroup(suiteName) else { return nil }
        return SandboxDefaults(context: self, group: suiteName)
    }

    /// A `FileManager` whose Documents directory is the app's in the device's sandbox, with
    /// file protection honoured: `createFile(atPath:contents:attributes:)` with
    /// `.protectionKey` `.complete` fails (false) on a locked device, `contents(atPath:)` of
    /// such a file is nil while locked. Other paths are the file system's, as `.default`.
    public var fileManager: FileManager { SandboxFileManager(context: self) }

    /// `UIApplication.isProtectedDataAvailable`: class A data (complete protection) can be read.
    public var isProtectedDataAvailable: Bool { (try? backend.status().protectedDataAvailable) ?? false }

    /// The app's Documents directory on disk.
    var documentsDirectory: URL { Device.documentsDirectory(of: backend.directory, app: app) }

    /// An app group's container on disk, when the app is entitled to the group; nil otherwise,
    /// as `containerURL(forSecurityApplicationGroupIdentifier:)` answers on iOS.
    func groupContainer(_ group: String) -> URL? {
        guard (try? backend.appGroups(app: app))?.contains(group) == true else { return nil }
        return DeviceLayout(root: backend.directory).groupContainer(group)
    }

    func recordSandboxFailure(_ error: any Error) {
        recordFailure(error as? KeychainError ?? KeychainError(.notAvailable, "\(error)"))
    }
}

/// UserDefaults backed by the device's sandbox property list.
final class SandboxDefaults: UserDefaults {
    private let context: KeyferryContext
    /// The app group whose suite this is; nil for the app's own defaults.
    private let group: String?

    init(context: KeyferryContext, group: String?) {
        self.context = context
        self.group = group
        super.init(suiteName: "com.keyferry.sandbox.\(context.app)" + (group.map { ".\($0)" } ?? ""))!
    }

    private var stored: [String: Any]? {
        do {
            return try context.backend.defaults(app: context.app, group: group)
        } catch {
            context.recordSandboxFailure(error)
            return nil
        }
    }

    override func object(forKey defaultName: String) -> Any? { stored?[defaultName] ?? registered[defaultName] }

    /// `register(defaults:)`'s values, which no protection hides: the context's, so that they
    /// last as long as the app's launch, not this object.
    private var registered: [String: Any] { context.registeredDefaults(group: group) }

    override func set(_ value: Any?, forKey defaultName: String) {
        change(set: value.map { [defaultName: $0] } ?? [:], remove: value == nil ? [defaultName] : [])
    }

    override func removeObject(forKey defaultName: String) { change(set: [:], remove: [defaultName]) }

    private func change(set: [String: Any], remove: [String]) {
        do {
            try context.backend.changeDefaults(set: set, remove: remove, app: context.app, group: group)
        } catch {
            context.recordSandboxFailure(error)
        }
    }

    override func register(defaults registrationDictionary: [String: Any]) { context.register(registrationDictionary, group: group) }
    override func dictionaryRepresentation() -> [String: Any] { registered.merging(stored ?? [:]) { $1 } }

    /// `removePersistentDomain(forName: Bundle.main.bundleIdentifier!)`, the seeds' "reset on
    /// logout": every stored key of this app (or this group's suite) goes; another domain is
    /// not the app's to reach.
    override func removePersistentDomain(forName domainName: String) {
        guard domainName == (group ?? context.app), let keys = stored?.keys, !keys.isEmpty else { return }
        change(set: [:], remove: Array(keys))
    }
    override func synchronize() -> Bool { true }
}

/// A FileManager whose Documents are the app's sandbox, with iOS's file protection.
final class SandboxFileManager: FileManager, @unchecked Sendable {
    private let context: KeyferryContext

    init(context: KeyferryContext) {
        self.context = context
        super.init()
    }

    override func urls(for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask) -> [URL] {
        directory == .documentDirectory ? [context.documentsDirectory] : super.urls(for: directory, in: domainMask)
    }

    /// The app group's shared container, or nil when the app is not entitled to the group.
    func groupContainer(_ groupIdentifier: String) -> URL? { context.groupContainer(groupIdentifier) }

    override func createFile(atPath path: String, contents data: Data?, attributes attr: [FileAttributeKey: Any]? = nil) -> Bool {
        guard let (name, group) = sandboxPath(path) else { return super.createFile(atPath: path, contents: data, attributes: attr) }
        do {
            let protection = try Self.protection(attr?[.protectionKey])
            try context.backend.writeFile(name, data ?? Data(), protection: protection, app: context.app, group: group)
            return true
        } catch {
            context.recordSandboxFailure(error)
            return false
        }
    }

    override func contents(atPath path: String) -> Data? {
        guard let (name, group) = sandboxPath(path) else { return super.contents(atPath: path) }
        do {
            return try context.backend.readFile(name, app: context.app, group: group)
        } catch {
            context.recordSandboxFailure(error)
            return nil
        }
    }

    override func removeItem(atPath path: String) throws {
        guard let (name, group) = sandboxPath(path) else { return try super.removeItem(atPath: path) }
        try context.backend.removeFile(name, app: context.app, group: group)
    }

    override func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }

    /// `Data.write(to:options:)` inside the sandbox: nil when `path` is outside it, false when
    /// the device's lock state refuses the write (`lastFailure` says why).
    func write(_ data: Data, atPath path: String, options: Data.WritingOptions) throws -> Bool? {
        guard let (name, group) = sandboxPath(path) else { return nil }
        if options.contains(.withoutOverwriting), fileExists(atPath: path) {
            throw CocoaError(.fileWriteFileExists, userInfo: [NSFilePathErrorKey: path])
        }
        let protection: FileProtection =
            switch options.intersection(.fileProtectionMask) {
            case .completeFileProtection: .complete
            case .completeFileProtectionUnlessOpen: .completeUnlessOpen
            case .noFileProtection: .none
            default: .completeUntilFirstUserAuthentication
            }
        do {
            try context.backend.writeFile(name, data, protection: protection, app: context.app, group: group)
            return true
        } catch {
            context.recordSandboxFailure(error)
            return false
        }
    }

    /// The path inside Documents (group nil) or inside a group container the app reaches, or
    /// nil for one outside both.
    private func sandboxPath(_ path: String) -> (name: String, group: String?)? {
        let full = URL(fileURLWithPath: path).standardizedFileURL.path
        func inside(_ root: URL) -> String? {
            let prefix = root.standardizedFileURL.path + "/"
            return full.hasPrefix(prefix) ? String(full.dropFirst(prefix.count)) : nil
        }
        if let name = inside(context.documentsDirectory) { return (name, nil) }
        let groups = DeviceLayout(root: context.backend.directory).groups
        guard let rest = inside(groups), let slash = rest.firstIndex(of: "/") else { return nil }
        let group = String(rest[..<slash])
        return context.groupContainer(group) == nil ? nil : (String(rest[rest.index(after: slash)...]), group)
    }

    /// iOS's class for a `.protectionKey` value; none given is iOS's default, class C.
    private static func protection(_ value: Any?) throws -> FileProtection {
        guard let value else { return .completeUntilFirstUserAuthentication }
        switch (value as? FileProtectionType)?.rawValue ?? value as? String {
        case FileProtectionType.complete.rawValue: return .complete
        case FileProtectionType.completeUnlessOpen.rawValue: return .completeUnlessOpen
        case FileProtectionType.completeUntilFirstUserAuthentication.rawValue: return .completeUntilFirstUserAuthentication
        case FileProtectionType.none.rawValue: return .none
        default: throw KeychainError(.param, "'\(value)' is not a FileProtectionType.")
        }
    }
}

extension FileManager {
    /// `containerURL(forSecurityApplicationGroupIdentifier:)`, which Foundation on Linux lacks:
    /// the app group's container on the device when this is an app's `fileManager` and the app
    /// is entitled to the group; nil otherwise, as on iOS.
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        (self as? SandboxFileManager)?.groupContainer(groupIdentifier) ?? (self as? DeviceFileManager)?.groupContainer(groupIdentifier)
    }
}
