import Foundation
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
    public var userDefaults: UserDefaults { SandboxDefaults(context: self) }

    /// A `FileManager` whose Documents directory is the app's in the device's sandbox, with
    /// file protection honoured: `createFile(atPath:contents:attributes:)` with
    /// `.protectionKey` `.complete` fails (false) on a locked device, `contents(atPath:)` of
    /// such a file is nil while locked. Other paths are the file system's, as `.default`.
    public var fileManager: FileManager { SandboxFileManager(context: self) }

    /// `UIApplication.isProtectedDataAvailable`: class A data (complete protection) can be read.
    public var isProtectedDataAvailable: Bool { (try? backend.status().protectedDataAvailable) ?? false }

    /// The app's Documents directory on disk.
    var documentsDirectory: URL { Device.documentsDirectory(of: backend.directory, app: app) }

    func recordSandboxFailure(_ error: any Error) {
        recordFailure(error as? KeychainError ?? KeychainError(.notAvailable, "\(error)"))
    }
}

/// UserDefaults backed by the device's sandbox property list.
final class SandboxDefaults: UserDefaults {
    private let context: KeyferryContext
    /// `register(defaults:)`'s values, which no protection hides.
    private var registered: [String: Any] = [:]

    init(context: KeyferryContext) {
        self.context = context
        super.init(suiteName: "com.keyferry.sandbox.\(context.app)")!
    }

    private var stored: [String: Any]? {
        do {
            return try context.backend.defaults(app: context.app)
        } catch {
            context.recordSandboxFailure(error)
            return nil
        }
    }

    override func object(forKey defaultName: String) -> Any? { stored?[defaultName] ?? registered[defaultName] }

    override func set(_ value: Any?, forKey defaultName: String) {
        change(set: value.map { [defaultName: $0] } ?? [:], remove: value == nil ? [defaultName] : [])
    }

    override func removeObject(forKey defaultName: String) { change(set: [:], remove: [defaultName]) }

    private func change(set: [String: Any], remove: [String]) {
        do {
            try context.backend.changeDefaults(set: set, remove: remove, app: context.app)
        } catch {
            context.recordSandboxFailure(error)
        }
    }

    override func register(defaults registrationDictionary: [String: Any]) { registered.merge(registrationDictionary) { $1 } }
    override func dictionaryRepresentation() -> [String: Any] { registered.merging(stored ?? [:]) { $1 } }
    override func synchronize() -> Bool { true }
}

/// A FileManager whose Documents are the app's sandbox, with iOS's file protection.
final class SandboxFileManager: FileManager {
    private let context: KeyferryContext

    init(context: KeyferryContext) {
        self.context = context
        super.init()
    }

    override func urls(for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask) -> [URL] {
        directory == .documentDirectory ? [context.documentsDirectory] : super.urls(for: directory, in: domainMask)
    }

    override func createFile(atPath path: String, contents data: Data?, attributes attr: [FileAttributeKey: Any]? = nil) -> Bool {
        guard let name = documentsPath(path) else { return super.createFile(atPath: path, contents: data, attributes: attr) }
        do {
            let protection = try Self.protection(attr?[.protectionKey])
            try context.backend.writeFile(name, data ?? Data(), protection: protection, app: context.app)
            return true
        } catch {
            context.recordSandboxFailure(error)
            return false
        }
    }

    override func contents(atPath path: String) -> Data? {
        guard let name = documentsPath(path) else { return super.contents(atPath: path) }
        do {
            return try context.backend.readFile(name, app: context.app)
        } catch {
            context.recordSandboxFailure(error)
            return nil
        }
    }

    override func removeItem(atPath path: String) throws {
        guard let name = documentsPath(path) else { return try super.removeItem(atPath: path) }
        try context.backend.removeFile(name, app: context.app)
    }

    override func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }

    /// The path inside Documents, or nil for one outside.
    private func documentsPath(_ path: String) -> String? {
        let root = context.documentsDirectory.standardizedFileURL.path + "/"
        let full = URL(fileURLWithPath: path).standardizedFileURL.path
        return full.hasPrefix(root) ? String(full.dropFirst(root.count)) : nil
    }

    /// iOS's classes as Keyferry keeps them: "complete unless open" (class B) is kept as
    /// complete, the nearest class Keyferry has; none given is iOS's default, class C.
    private static func protection(_ value: Any?) throws -> FileProtection {
        guard let value else { return .completeUntilFirstUserAuthentication }
        switch (value as? FileProtectionType)?.rawValue ?? value as? String {
        case FileProtectionType.complete.rawValue, FileProtectionType.completeUnlessOpen.rawValue: return .complete
        case FileProtectionType.completeUntilFirstUserAuthentication.rawValue: return .completeUntilFirstUserAuthentication
        case FileProtectionType.none.rawValue: return .none
        default: throw KeychainError(.param, "'\(value)' is not a FileProtectionType.")
        }
    }
}
