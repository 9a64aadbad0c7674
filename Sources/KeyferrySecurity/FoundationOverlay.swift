public import Foundation

// App code that calls `UserDefaults.standard`, `FileManager.default` and
// `Data.write(to:options:)` reaches the host, not the device. Swift lets no imported module
// shadow Foundation's members (both would be ambiguous), but a module's own declarations shadow
// every import: one file in the app's module (docs/swift.md gives it) names these types for
// it, and its unchanged calls reach the current context's device.

/// `UserDefaults` whose `.standard` and `init(suiteName:)` are the calling app's on the current
/// context's device: its property list in the sandbox, unreadable before first unlock, backed
/// up, wiped at uninstall. Each call finds the context anew, so one object serves tests that
/// run side by side; with no context it is the host's, as Foundation's.
open class DeviceUserDefaults: UserDefaults {
    /// The suite named at creation; nil for the app's own defaults.
    private let suite: String?

    public override init?(suiteName: String?) {
        suite = suiteName
        super.init(suiteName: nil)
    }

    /// The app's own defaults on the current device.
    open override class var standard: DeviceUserDefaults { DeviceUserDefaults(suiteName: nil)! }

    /// Where the call goes: an app group's suite on the device, the app's own defaults (which a
    /// suite that is no app group shares here, where iOS gives it a file of its own in the same
    /// sandbox, with the same protection), or the host's when no context is current.
    private var target: UserDefaults {
        guard let context = KeyferryContext.current else {
            return suite.flatMap { UserDefaults(suiteName: $0) } ?? UserDefaults.standard
        }
        return suite.flatMap { context.userDefaults(suiteName: $0) } ?? context.userDefaults
    }

    open override func object(forKey defaultName: String) -> Any? { target.object(forKey: defaultName) }
    open override func set(_ value: Any?, forKey defaultName: String) { target.set(value, forKey: defaultName) }
    open override func removeObject(forKey defaultName: String) { target.removeObject(forKey: defaultName) }
    open override func register(defaults registrationDictionary: [String: Any]) { target.register(defaults: registrationDictionary) }
    open override func dictionaryRepresentation() -> [String: Any] { target.dictionaryRepresentation() }
    open override func synchronize() -> Bool { target.synchronize() }
    open override func removePersistentDomain(forName domainName: String) { target.removePersistentDomain(forName: domainName) }
}

/// `FileManager` whose `.default` finds the calling app's Documents and app group containers
/// on the current context's device, with iOS's file protection; other paths, and every call
/// with no context, are the host's.
open class DeviceFileManager: FileManager, @unchecked Sendable {
    open override class var `default`: DeviceFileManager { DeviceFileManager() }

    /// The current app's sandbox, or nil for the host's file system.
    private var sandbox: SandboxFileManager? { KeyferryContext.current.map(SandboxFileManager.init(context:)) }

    open override func urls(for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask) -> [URL] {
        sandbox?.urls(for: directory, in: domainMask) ?? super.urls(for: directory, in: domainMask)
    }

    open override func createFile(atPath path: String, contents data: Data?, attributes attr: [FileAttributeKey: Any]? = nil) -> Bool {
        sandbox?.createFile(atPath: path, contents: data, attributes: attr) ?? super.createFile(atPath: path, contents: data, attributes: attr)
    }

    open override func contents(atPath path: String) -> Data? {
        guard let sandbox else { return super.contents(atPath: path) }
        return sandbox.contents(atPath: path)
    }

    open override func removeItem(atPath path: String) throws {
        guard let sandbox else { return try super.removeItem(atPath: path) }
        try sandbox.removeItem(atPath: path)
    }

    open override func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }

    /// The app group's container on the device, or nil when the app is not entitled to it.
    func groupContainer(_ groupIdentifier: String) -> URL? { sandbox?.groupContainer(groupIdentifier) }
}

/// `Data.write(to:options:)` as the device does it, for the one-line `Data` extension above.
public enum DeviceFiles {
    /// Writes `data` as Foundation would, except inside the current app's sandbox, where the
    /// options' protection class is kept and enforced: a `.completeFileProtection` write while
    /// the device is locked fails with `CocoaError.fileWriteNoPermission`, as on iOS.
    public static func write(_ data: Data, to url: URL, options: Data.WritingOptions = []) throws {
        guard let context = KeyferryContext.current, url.isFileURL,
            let written = try SandboxFileManager(context: context).write(data, atPath: url.path, options: options)
        else { return try data.write(to: url, options: options) }
        guard written else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: url.path, NSURLErrorKey: url])
        }
    }
}
