package import Crypto
package import Foundation

/// One keychain item as `keychain-backup.plist` carries it, sealed in version 3 (`IOS-BACKUP.md`,
/// section 9): little-endian version, class and wrapped-key length, the item key wrapped under
/// the backup keybag's class key, then AES-GCM (empty IV) of the item's DER attributes.
package struct SealedKeychainItem: Equatable, Sendable {
    /// 6–11 (`ak` … `dku`), masked to its low four bits as readers do.
    package var protectionClass: UInt32
    /// "Default IV" mode (version bit 31): a fixed 12-byte IV, the header as AAD. Read, never written.
    package var defaultIV: Bool
    package var wrappedKey: [UInt8]
    /// The GCM ciphertext, then its 16-byte tag.
    package var sealed: [UInt8]
    /// The first twelve bytes as read (the AAD of the default-IV mode).
    private var header: [UInt8]

    package static let version: UInt32 = 3
    private static let defaultIVFlag: UInt32 = 0x8000_0000
    private static let fixedIV: [UInt8] = [0x1E, 0xA0, 0x5C, 0xA9, 0x98, 0x2E, 0x87, 0xDC, 0xF1, 0x45, 0xE8, 0x24]

    /// Seals `plaintext` (an item's DER attributes) under `itemKey`, a fresh key of its own
    /// (by default drawn here), wrapped under `classKey`.
    package init(sealing plaintext: [UInt8], protectionClass: UInt32, classKey: SymmetricKey, itemKey: SymmetricKey = SymmetricKey(size: .bits256)) throws {
        self.protectionClass = protectionClass
        defaultIV = false
        wrappedKey = Array(try AES.KeyWrap.wrap(itemKey, using: classKey))
        header = Self.littleEndian(Self.version) + Self.littleEndian(protectionClass) + Self.littleEndian(UInt32(wrappedKey.count))
        sealed = try KeychainGCM.seal(plaintext, key: itemKey)
    }

    /// Reads the layout; nothing is opened. Versions other than 3 are refused by name.
    package init(bytes: some Collection<UInt8>) throws {
        let bytes = Array(bytes)
        guard bytes.count >= 12 else { throw KeychainBackupError.truncated("\(bytes.count) bytes, less than its 12-byte header") }
        let rawVersion = Self.number(bytes[0..<4])
        let version = rawVersion & ~Self.defaultIVFlag
        guard version == Self.version else { throw KeychainBackupError.unsupportedVersion(version) }
        defaultIV = rawVersion & Self.defaultIVFlag != 0
        protectionClass = Self.number(bytes[4..<8]) & 0xF
        let keyLength = Int(Self.number(bytes[8..<12]))
        guard keyLength == 40 else { throw KeychainBackupError.malformed("a wrapped item key of \(keyLength) bytes, not 40") }
        guard bytes.count >= 12 + keyLength + KeychainGCM.tagByteCount else {
            throw KeychainBackupError.truncated("\(bytes.count) bytes, too few for its wrapped key and tag")
        }
        header = Array(bytes[0..<12])
        wrappedKey = Array(bytes[12..<12 + keyLength])
        sealed = Array(bytes[(12 + keyLength)...])
    }

    package var bytes: [UInt8] { header + wrappedKey + sealed }

    /// The item's DER attributes. `KeychainBackupError.doesNotOpen` when the key does not
    /// unwrap or the tag does not match: another class key, or altered bytes.
    package func open(classKey: SymmetricKey) throws -> [UInt8] {
        do {
            let itemKey = try AES.KeyWrap.unwrap(wrappedKey, using: classKey)
            return defaultIV
                ? try KeychainGCM.open(sealed, key: itemKey, iv: Self.fixedIV, aad: header)
                : try KeychainGCM.open(sealed, key: itemKey)
        } catch {
            throw KeychainBackupError.doesNotOpen(protectionClass)
        }
    }

    private static func littleEndian(_ number: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: number >> (8 * $0)) } }
    private static func number(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.reversed().reduce(0) { $0 << 8 | UInt32($1) } }
}

/// `KeychainDomain/keychain-backup.plist`: a binary plist of the four tables (`genp`, `inet`,
/// `cert`, `keys`), each an array of `{v_Data, v_PersistentRef}`, and the keybag's UUID.
package struct KeychainBackupPlist: Equatable, Sendable {
    package struct Entry: Equatable, Sendable {
        /// The sealed item (`SealedKeychainItem`'s bytes).
        package var data: Data
        /// Opaque: the old form is the 4-byte table name and a u64 row id.
        package var persistentReference: Data

        package init(data: Data, persistentReference: Data) {
            self.data = data
            self.persistentReference = persistentReference
        }
    }

    package static let tables = ["genp", "inet", "cert", "keys"]
    package var entries: [String: [Entry]]
    /// The backup keybag's UUID, lowercase with dashes.
    package var keybagUUID: String?

    package init(entries: [String: [Entry]], keybagUUID: String?) {
        self.entries = entries
        self.keybagUUID = keybagUUID
    }

    /// A persistent reference in the old form: the table's four letters and the row id, big-endian.
    package static func persistentReference(table: String, row: UInt64) -> Data {
        Data(table.utf8.prefix(4)) + Data(BigEndian.bytes(row, count: 8))
    }

    package var propertyList: PropertyList {
        var top: [String: PropertyList] = [:]
        for (table, rows) in entries where !rows.isEmpty {
            top[table] = .array(rows.map { .dictionary(["v_Data": .data($0.data), "v_PersistentRef": .data($0.persistentReference)]) })
        }
        if let keybagUUID { top["keybag-uuid"] = .string(keybagUUID) }
        return .dictionary(top)
    }

    /// Reads the container; tables Keyferry does not know are left out, an entry without
    /// `v_Data` is malformed.
    package init(propertyList: PropertyList) throws {
        guard let top = propertyList.dictionary else { throw KeychainBackupError.malformed("keychain-backup.plist is not a dictionary") }
        var entries: [String: [Entry]] = [:]
        for table in Self.tables {
            guard let value = top[table] else { continue }
            guard let rows = value.array else { throw KeychainBackupError.malformed("its \(table) table is not an array") }
            entries[table] = try rows.enumerated().map { index, row in
                guard let data = row["v_Data"]?.data else { throw KeychainBackupError.malformed("\(table)[\(index)] has no v_Data") }
                return Entry(data: data, persistentReference: row["v_PersistentRef"]?.data ?? Data())
            }
        }
        self.entries = entries
        keybagUUID = top["keybag-uuid"]?.string
    }
}

package enum KeychainBackupError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated(String)
    case malformed(String)
    case unsupportedVersion(UInt32)
    case doesNotOpen(UInt32)

    package var description: String {
        switch self {
        case .truncated(let detail): "a keychain item is cut short: \(detail)"
        case .malformed(let detail): "the backup's keychain is malformed: \(detail)"
        case .unsupportedVersion(let version):
            "a keychain item sealed in version \(version), which Keyferry does not read (only 3, what backups of iOS 5 and later carry)"
        case .doesNotOpen(let protectionClass): "a keychain item of class \(protectionClass) does not open under that class's key"
        }
    }
}
