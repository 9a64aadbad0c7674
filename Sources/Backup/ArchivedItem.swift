import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// One keychain item as a backup carries it: in view, what a restore report needs to name the
/// item; sealed, the whole item, under a key that decides where it can come back.
public struct ArchivedItem: Sendable, Equatable {
    public var uuid: UUID
    public var itemClass: ItemClass
    public var protection: ProtectionClass
    public var synchronizable: Bool
    public var accessGroup: String
    public var wrapping: Wrapping
    /// How a person would name the item (`alice @ imap.example.com`), so that a report can say
    /// which item was lost. Only in encrypted archives, whose sections are sealed; an
    /// unencrypted archive shows no attribute of any item.
    public var name: String?
    /// XChaCha20-Poly1305 of the whole item (`ExportedItem.archiveBytes`, its data included).
    public var sealed: Data

    public enum Wrapping: String, Sendable {
        /// Under the source device's UID-derived backup key: comes back on that device only.
        case device
        /// Under the encrypted archive's backup keybag: comes back on any device.
        case backup
    }

    /// Which key an item is wrapped with in an archive of `mode`; nil for items never exported
    /// (`whenPasscodeSetThisDeviceOnly`).
    static func wrapping(for protection: ProtectionClass, mode: ArchiveMode) -> Wrapping? {
        if protection == .whenPasscodeSetThisDeviceOnly { return nil }
        return mode == .encrypted && !protection.isThisDeviceOnly ? .backup : .device
    }

    init(_ item: ExportedItem, wrapping: Wrapping, key: SymmetricKey, named: Bool, entropy: any EntropySource) {
        uuid = item.uuid
        name = named ? Self.name { try? item.attributes.value(for: $0) } : nil
        itemClass = item.itemClass
        protection = item.protection
        synchronizable = item.synchronizable
        accessGroup = item.accessGroup
        self.wrapping = wrapping
        sealed = AEAD.seal(item.archiveBytes, key: key, associatedData: Self.associatedData(uuid, protection, wrapping), entropy: entropy)
    }

    /// The item itself; fails with `CryptoError.authenticationFailed` under any other key.
    func open(with key: SymmetricKey) throws -> ItemRecord {
        let bytes = try AEAD.open(sealed, key: key, associatedData: Self.associatedData(uuid, protection, wrapping))
        guard let record = try? ItemRecord(archiveBytes: bytes) else { throw CryptoError.authenticationFailed }
        guard record.uuid == uuid, record.protection == protection, record.itemClass == itemClass else {
            throw CryptoError.authenticationFailed
        }
        return record
    }

    /// Account and service (or server), else the label, else the application tag.
    static func name(_ attribute: (AttributeKey) -> AttributeValue?) -> String? {
        func text(_ key: AttributeKey) -> String? {
            switch attribute(key) {
            case .string(let value) where !value.isEmpty: value
            case .data(let value) where !value.isEmpty: String(data: value, encoding: .utf8)
            default: nil
            }
        }
        let parts = [text(.account), text(.service) ?? text(.server)].compactMap { $0 }
        return parts.isEmpty ? text(.label) ?? text(.applicationTag) : parts.joined(separator: " @ ")
    }

    /// Binds the seal to the item's identity, class and wrapping: a sealed item moved onto
    /// another entry does not open.
    private static func associatedData(_ uuid: UUID, _ protection: ProtectionClass, _ wrapping: Wrapping) -> [UInt8] {
        Array("keyferry item 1|\(uuid.uuidString)|\(protection.rawValue)|\(wrapping.rawValue)".utf8)
    }
}

/// One file of an app's sandbox, or a piece of one: files larger than a section are carried in
/// pieces at increasing offsets.
public struct SandboxEntry: Sendable, Equatable {
    public var bundleID: String
    /// `Library/Preferences/BUNDLE.plist` for UserDefaults, `Documents/NAME` for files.
    public var path: String
    public var protection: String
    public var offset: Int
    public var contents: Data
}

/// The backup keybag of an encrypted archive: one key per migratable protection class, derived
/// from the archive key, which only the password opens.
struct BackupKeybag: Sendable {
    let archiveKey: SymmetricKey

    func key(for protection: ProtectionClass) -> SymmetricKey {
        let id: UInt64 = switch protection {
        case .whenUnlocked: 1
        case .afterFirstUnlock: 2
        case .always: 3
        default: preconditionFailure("\(protection.name) items are never wrapped with the backup keybag")
        }
        return archiveKey.derive(context: "kfbkbag_", id: id)
    }
}
