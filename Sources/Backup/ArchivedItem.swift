package import Foundation
package import KeychainModel
import KeychainStore
import KeyferryCrypto

/// One keychain item as a backup carries it: in view, what a restore report needs to name the
/// item; sealed, the whole item, under a key that decides where it can come back.
package struct ArchivedItem: Sendable, Equatable {
    package var uuid: UUID
    package var itemClass: ItemClass
    package var protection: ProtectionClass
    package var synchronizable: Bool
    package var accessGroup: String
    package var wrapping: Wrapping
    /// How a person would name the item (`alice @ imap.example.com`), so that a report can say
    /// which item was lost. Only in encrypted archives, whose sections are sealed; an
    /// unencrypted archive shows no attribute of any item.
    package var name: String?
    /// Format 3: `lp(item key wrapped under the archive's key) ‖ lp(sealed metadata) ‖
    /// lp(sealed secret)`, the two ciphertexts as the store holds them (`ItemSeal`).
    /// Formats 1 and 2: XChaCha20-Poly1305 of the whole item, its data included.
    package var sealed: Data

    package enum Wrapping: String, Sendable {
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

    /// The item's key wrapped under `key` with `nonce`; its two ciphertexts go in as they are.
    init(_ item: ExportedItem, seal: ItemSeal, wrapping: Wrapping, key: SymmetricKey, binding: ItemBinding, named: Bool, nonce: [UInt8]) {
        uuid = item.uuid
        name = named ? (try? item.attributes.values(of: Self.nameAttributes)).flatMap { values in Self.name { values[$0] } } : nil
        itemClass = item.itemClass
        protection = item.protection
        synchronizable = item.synchronizable
        accessGroup = item.accessGroup
        self.wrapping = wrapping
        sealed = Data()
        var w = ByteWriter(capacity: 12 + SymmetricKey.byteCount + AEAD.overhead + seal.metadata.count + seal.secret.count)
        w.lengthPrefixed(AEAD.wrap(seal.key, under: key, nonce: nonce, associatedData: binding.associatedData(self)))
        w.lengthPrefixed(seal.metadata)
        w.lengthPrefixed(seal.secret)
        sealed = Data(w.bytes)
    }

    /// The item itself; fails with `CryptoError.authenticationFailed` under any other key, or
    /// in any other archive. A format 3 item's secret stays sealed: it is opened where it is
    /// read, after the restore.
    func open(with key: SymmetricKey, binding: ItemBinding) throws -> Keychain.RestoredItem {
        let item: Keychain.RestoredItem
        if binding.version >= 3 {
            var r = ByteReader(Array(sealed))
            let wrapped = try r.lengthPrefixed()
            let (metadata, secret) = (Data(try r.lengthPrefixed()), Data(try r.lengthPrefixed()))
            guard r.isAtEnd else { throw CryptoError.authenticationFailed }
            let itemKey = try AEAD.unwrap(wrapped, under: key, associatedData: binding.associatedData(self))
            item = .sealed(
                try ItemSeal(key: itemKey, metadata: metadata, secret: secret)
                    .opened(uuid: uuid, itemClass: itemClass, protection: protection, synchronizable: synchronizable))
        } else {
            let bytes = try AEAD.open(sealed, key: key, associatedData: binding.associatedData(self))
            guard let record = try? ItemRecord(archiveBytes: bytes) else { throw CryptoError.authenticationFailed }
            item = .whole(record)
        }
        // The group and the sync flag in view decide what a restore does with the item (the
        // device's own group is never restored): what was sealed must agree with them.
        let record = item.record
        guard record.uuid == uuid, record.protection == protection, record.itemClass == itemClass,
            record.accessGroup == accessGroup, record.synchronizable == synchronizable
        else {
            throw CryptoError.authenticationFailed
        }
        return item
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
    let version: UInt16
    /// nil in format 1 archives, whose items are bound to no archive.
    let archiveID: Data?
    /// What every item's associated data starts with: built once per archive.
    private let prefix: [UInt8]

    init(_ header: ArchiveHeader, version: UInt16) {
        self.version = version
        archiveID = version >= 2 ? header.archiveID : nil
        var w = ByteWriter(capacity: 64)
        w.raw("keyferry item \(min(version, 3))|".utf8)
        if let archiveID {
            w.raw(Hex.encode(archiveID).utf8)
            w.uint8(UInt8(ascii: "|"))
        }
        prefix = w.bytes
    }

    /// Binds the seal to the archive, the item's identity, its protection and wrapping, so a
    /// sealed item moved onto another entry or into another archive does not open. ARCHIVE is
    /// the archive ID in lowercase hex:
    /// - format 3: `keyferry item 3|ARCHIVE|UUID|class|protection|sync|wrapping` (the item key's
    ///   wrap; the ciphertexts are bound to the UUID and class by the item key's own seal);
    /// - format 2: `keyferry item 2|ARCHIVE|UUID|protection|wrapping`;
    /// - format 1: `keyferry item 1|UUID|protection|wrapping`.
    func associatedData(_ item: ArchivedItem) -> [UInt8] {
        var w = ByteWriter(capacity: 128)
        w.raw(prefix)
        w.uuidText(item.uuid)
        let parts =
            version >= 3
            ? [item.itemClass.rawValue, item.protection.rawValue, item.synchronizable ? "1" : "0", item.wrapping.rawValue]
            : [item.protection.rawValue, item.wrapping.rawValue]
        for part in parts {
            w.uint8(UInt8(ascii: "|"))
            w.raw(part.utf8)
        }
        return w.bytes
    }
}

/// One file of an app's sandbox, or a piece of one: files larger than a section are carried in
/// pieces at increasing offsets.
package struct SandboxEntry: Sendable, Equatable {
    package var bundleID: String
    /// `Library/Preferences/BUNDLE.plist` for UserDefaults, `Documents/NAME` for files.
    package var path: String
    package var protection: String
    package var offset: Int
    package var contents: Data

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
