package import AppleFormats
import Crypto
package import Foundation
package import KeychainModel

/// How an iOS backup names Keyferry's protection classes: keychain classes 6–11 (`akpu`, 12,
/// never leaves a phone) and file classes 1 to 4 (`IOS-BACKUP.md`, sections 3 and 9).
enum PhoneClass {
    static func keychain(_ protection: ProtectionClass) -> UInt32? {
        switch protection {
        case .whenUnlocked: 6
        case .afterFirstUnlock: 7
        case .always: 8
        case .whenUnlockedThisDeviceOnly: 9
        case .afterFirstUnlockThisDeviceOnly: 10
        case .alwaysThisDeviceOnly: 11
        case .whenPasscodeSetThisDeviceOnly: nil
        }
    }

    static func protection(keychainClass: UInt32) -> ProtectionClass? {
        ProtectionClass.allCases.first { keychain($0) == keychainClass }
    }

    /// Keychain classes whose keys a backup ties to the device that made it.
    static let thisDeviceOnly: Set<UInt32> = [9, 10, 11]
    static let keychainClasses: [UInt32] = Array(6...11)
    static let fileClasses: [UInt32] = Array(1...5)

    static func file(_ protection: FileProtection) -> UInt32 {
        switch protection {
        case .complete: 1
        case .completeUnlessOpen: 2
        case .completeUntilFirstUserAuthentication: 3
        case .none: 4
        }
    }

    /// Class 5 and unknown classes are read as `complete`, the strictest.
    static func fileProtection(_ fileClass: Int64) -> FileProtection {
        switch fileClass {
        case 2: .completeUnlessOpen
        case 3: .completeUntilFirstUserAuthentication
        case 4: .none
        default: .complete
        }
    }
}

/// A keychain item as a backup's DER attributes hold it: every attribute under Apple's short
/// name, the engine's own (`agrp`, `pdmn`, `sync`, dates) and the secret as `v_Data`.
package enum PhoneKeychainItem {
    /// The plaintext a phone seals for `record` (`s3dl_export_row`): access control is left out.
    static func attributes(_ record: ItemRecord) -> PropertyList {
        var entries: [String: PropertyList] = [:]
        for (key, value) in record.attributes { entries[key.rawValue] = propertyList(value) }
        entries[AttributeKey.accessGroup.rawValue] = .string(record.accessGroup)
        entries[AttributeKey.accessible.rawValue] = .string(record.protection.rawValue)
        entries[AttributeKey.synchronizable.rawValue] = .boolean(record.synchronizable)
        entries[AttributeKey.creationDate.rawValue] = .date(record.creationDate)
        entries[AttributeKey.modificationDate.rawValue] = .date(record.modificationDate)
        entries["UUID"] = .string(record.uuid.uuidString)
        entries["musr"] = .data(Data())
        entries["tomb"] = .integer(0)
        let secret = record.data ?? Data()
        entries["sha1"] = .data(Data(Insecure.SHA1.hash(data: secret)))
        entries["v_Data"] = .data(secret)
        return .dictionary(entries)
    }

    /// Why a decrypted item cannot become a Keyferry item, or the item.
    package enum Decoded {
        case item(ItemRecord)
        /// A kind of item a phone never exports (`neverBackedUp` says which): read, not restored.
        case neverBackedUp(ItemRecord, String)
        /// A deleted synchronizable item's tombstone: nothing to restore.
        case tombstone
        case unreadable(String)
    }

    /// The item a backup's DER attributes describe, in table `table` and class `protection`
    /// (the sealed header's, which `pdmn` must agree with), read as phones of every iOS write
    /// it (`Protocol/ios-backup.md`, "Items as phones write them"): with or without `UUID`,
    /// numbers as integers or strings, text as strings or data. Attributes Keyferry does not
    /// keep (`sha1`, `persistref`, `musr`, `vwht`, `pcs*`) are left out; an item without `UUID`
    /// gets a name-based one, so the same backup restored twice names it the same.
    package static func record(from plist: PropertyList, table: ItemClass, protection: ProtectionClass, sealedBytes: [UInt8], backupDate: Date) -> Decoded {
        guard let entries = plist.dictionary else { return .unreadable("its attributes are not a dictionary") }
        if let tomb = entries["tomb"], bool(tomb) == true { return .tombstone }
        if let pdmn = entries[AttributeKey.accessible.rawValue]?.string, pdmn != protection.rawValue {
            return .unreadable("it says it is \(pdmn) but is sealed under the \(protection.name) class key")
        }
        guard let group = entries[AttributeKey.accessGroup.rawValue]?.string, !group.isEmpty else { return .unreadable("it has no access group") }
        var attributes: Attributes = [:]
        for (name, value) in entries {
            let key = AttributeKey(rawValue: name)
            guard table.attributes.contains(key), let converted = attributeValue(value, key) else { continue }
            attributes[key] = converted
        }
        let uuid: UUID
        switch entries["UUID"] {
        case nil: uuid = nameBasedUUID(sealedBytes)
        case .string(let text)?:
            guard let parsed = UUID(uuidString: text) else { return .unreadable("its UUID '\(text.prefix(40))' is not a UUID") }
            uuid = parsed
        case .data(let bytes)?:
            guard let parsed = UUID(storedBytes: bytes) else { return .unreadable("its UUID is \(bytes.count) bytes, not 16") }
            uuid = parsed
        default: return .unreadable("its UUID is neither a string nor data")
        }
        let created = entries[AttributeKey.creationDate.rawValue]?.date ?? backupDate
        let record = ItemRecord(
            itemClass: table, uuid: uuid, accessGroup: group, protection: protection,
            synchronizable: entries[AttributeKey.synchronizable.rawValue].flatMap(bool) ?? false, accessControl: nil,
            creationDate: created, modificationDate: entries[AttributeKey.modificationDate.rawValue]?.date ?? created,
            attributes: attributes, data: entries["v_Data"]?.data ?? Data())
        do {
            if let why = try neverBackedUp(entries) { return .neverBackedUp(record, why) }
        } catch {
            return .unreadable("\(error)")
        }
        return .item(record)
    }

    /// Why a phone would have left the item out of its backup (`SecItemDb.c`'s export filter),
    /// or nil: an access control that asks for the user, a key on a token, an App Clip's or a
    /// system-bound item. An access control that asks for nothing comes back as its protection
    /// class alone, as Keyferry keeps such an item.
    static func neverBackedUp(_ entries: [String: PropertyList]) throws -> String? {
        if let accc = entries[AttributeKey.accessControl.rawValue]?.data, !accc.isEmpty, try AccessControlData.asksForUser(accc) {
            return "its access control asks for the user"
        }
        if let token = entries[AttributeKey.tokenID.rawValue]?.string, !token.isEmpty { return "its key is on a token (\(token.prefix(40)))" }
        if let clip = entries["clip"], bool(clip) == true { return "an App Clip's item" }
        if let systemBound = entries["sysb"], bool(systemBound) == true { return "a system-bound item" }
        return nil
    }

    private static func propertyList(_ value: AttributeValue) -> PropertyList {
        switch value {
        case .string(let text): .string(text)
        case .data(let data): .data(data)
        case .number(let number): .integer(number)
        case .bool(let flag): .boolean(flag)
        case .date(let date): .date(date)
        }
    }

    /// Phones write some flags as numbers and some numbers as strings: taken when unambiguous.
    /// A four-character code (`ptcl`, `atyp`, `crtr`, `type`) may be the integer of its four
    /// bytes, big-endian, or the string. A blob attribute (the account, the service) keeps the
    /// type the app stored it as.
    private static func attributeValue(_ value: PropertyList, _ key: AttributeKey) -> AttributeValue? {
        guard let kind = key.kind else { return nil }
        return switch (kind, value) {
        case (_, .string(let text)) where key.isBlob: .string(text)
        case (_, .data(let data)) where key.isBlob: .data(data)
        case (.string, .string(let text)): .string(text)
        case (.string, .data(let data)): String(data: data, encoding: .utf8).map(AttributeValue.string)
        case (.string, .integer(let number)): fourCharacterCode(number).map(AttributeValue.string)
        case (.data, .data(let data)): .data(data)
        case (.data, .string(let text)): .data(Data(text.utf8))
        case (.number, .integer(let number)): .number(number)
        case (.number, .boolean(let flag)): .number(flag ? 1 : 0)
        case (.number, .string(let text)): (Int64(text) ?? fourCharacterCode(text)).map(AttributeValue.number)
        case (.bool, _): bool(value).map(AttributeValue.bool)
        case (.date, .date(let date)): .date(date)
        default: nil
        }
    }

    /// `'htps'` from 0x68747073; nil unless the four bytes are printable ASCII.
    static func fourCharacterCode(_ number: Int64) -> String? {
        guard (0...0xFFFF_FFFF).contains(number) else { return nil }
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: number >> (8 * (3 - $0))) }
        guard bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// 0x68747073 from `'htps'`; nil unless four ASCII characters.
    static func fourCharacterCode(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        return bytes.reduce(0) { $0 << 8 | Int64($1) }
    }

    private static func bool(_ value: PropertyList) -> Bool? {
        switch value {
        case .boolean(let flag): flag
        case .integer(let number): number != 0
        default: nil
        }
    }

    /// A stable identity for an item a phone wrote without a `UUID` attribute, or that does not
    /// open: the same backup read twice names it the same.
    static func nameBasedUUID(_ bytes: [UInt8]) -> UUID {
        var digest = Array(SHA256.hash(data: bytes).prefix(16))
        digest[6] = digest[6] & 0x0F | 0x50
        digest[8] = digest[8] & 0x3F | 0x80
        return digest.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }
}
