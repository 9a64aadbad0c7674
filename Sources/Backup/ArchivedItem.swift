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

    init(_ item: ExportedItem, wrapping: Wrapping, key: SymmetricKey, binding: ItemBinding, named: Bool, entropy: any EntropySource) {
        uuid = item.uuid
        if named, let values = try? item.attributes.values(of: Self.nameAttributes) {
            name = Self.name { values[$0] }
        }
        itemClass = item.itemClass
        protection = item.protection
        synchronizable = item.synchronizable
        accessGroup = item.accessGroup
        self.wrapping = wrapping
        sealed = AEAD.seal(item.archiveBytes, key: key, associatedData: binding.associatedData(uuid, protection, wrapping), entropy: entropy)
    }

    /// The item itself; fails with `CryptoError.authenticationFailed` under any other key, or
    /// in any other archive.
    func open(with key: SymmetricKey, binding: ItemBinding) throws -> ItemRecord {
        let bytes = try AEAD.open(sealed, key: key, associatedData: binding.associatedData(uuid, protection, wrapping))
        guard let record = try? ItemRecord(archiveBytes: bytes) else { throw CryptoError.authenticationFailed }
        // The group and the sync flag in view decide what a restore does with the item (the
        // device's own group is never restored): a sealed record must agree with them.
        guard record.uuid == uuid, record.protection == protection, record.itemClass == itemClass,
            record.accessGroup == accessGroup, record.synchronizable == synchronizable
        else {
            throw CryptoError.authenticationFailed
        }
        return record
    }

    /// The attributes `name` reads.
    static let nameAttributes = AttributeSelection([.account, .service, .server, .label, .applicationTag])

    /// Account and service (or server), else the label, else the application tag.
    package static func name(_ attribute: (AttributeKey) -> AttributeValue?) -> String? {
        func text(_ key: AttributeKey) -> String? {
            attribute(key)?.text.flatMap { $0.isEmpty ? nil : $0 }
        }
        let account = text(.account)
        let service = text(.service) ?? text(.server)
        switch (account, service) {
        case let (account?, service?): return account + " @ " + service
        case (nil, nil): return text(.label) ?? text(.applicationTag)
        default: return account ?? service
        }
    }
}

/// What an archived item's seal is bound to besides the item: from format 2, the archive that
/// holds it, so that an item cannot be moved from one archive of a device into another (an
/// older password put back, a deleted item brought back).
struct ItemBinding: Sendable {
    /// nil in format 1 archives, whose items are bound to no archive.
    let archiveID: Data?

    init(_ header: ArchiveHeader, version: UInt16) {
        archiveID = version >= 2 ? header.archiveID : nil
    }

    /// `keyferry item 2|ARCHIVE|UUID|protection|wrapping` (format 1: `keyferry item
    /// 1|UUID|protection|wrapping`), ARCHIVE in lowercase hex: binds the seal to the archive,
    /// the item's identity, its class and wrapping, so a sealed item moved onto another entry
    /// or into another archive does not open.
    func associatedData(_ uuid: UUID, _ protection: ProtectionClass, _ wrapping: ArchivedItem.Wrapping) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        if let archiveID {
            w.raw("keyferry item 2|".utf8)
            w.raw(Hex.encode(archiveID).utf8)
            w.uint8(UInt8(ascii: "|"))
        } else {
            w.raw("keyferry item 1|".utf8)
        }
        w.uuidText(uuid)
        for part in [protection.rawValue, wrapping.rawValue] {
            w.uint8(UInt8(ascii: "|"))
            w.raw(part.utf8)
        }
        return w.bytes
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

    /// Pieces of a file arrive in order, so an offset is the size of the file so far: 1 TiB is
    /// past any sandbox, and keeps offset + length within an Int.
    static let maximumOffset = 1 << 40
}

/// The backup keybag of an encrypted archive: one key per migratable protection class, derived
/// from the archive key, which only the password opens.
struct BackupKeybag: Sendable {
    let archiveKey: SymmetricKey

    /// Nil for the ThisDeviceOnly classes, which are never wrapped with it: an archive that
    /// says otherwise was altered, and its item is reported damaged.
    func key(for protection: ProtectionClass) -> SymmetricKey? {
        let id: UInt64
        switch protection {
        case .whenUnlocked: id = 1
        case .afterFirstUnlock: id = 2
        case .always: id = 3
        default: return nil
        }
        return archiveKey.derive(context: "kfbkbag_", id: id)
    }
}
