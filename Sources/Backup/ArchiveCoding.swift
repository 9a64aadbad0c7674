import Foundation
import KeychainModel
import KeychainStore

// The binary coding of section contents (Protocol/backup.md): Keyferry's ByteWriter encoding,
// little-endian lengths, as in the store. JSON cost more than everything else a backup does.

/// A keychain or sandbox section: a count, then each entry length-prefixed.
enum EntryList {
    static func encode(_ entries: [[UInt8]]) -> Data {
        var w = ByteWriter()
        w.uint32(UInt32(entries.count))
        for entry in entries { w.lengthPrefixed(entry) }
        return Data(w.bytes)
    }

    static func decode(_ content: Data) throws -> [ArraySlice<UInt8>] {
        var r = ByteReader(Array(content))
        let count = try r.uint32()
        var entries: [ArraySlice<UInt8>] = []
        entries.reserveCapacity(Int(min(count, 1 << 20)))
        for _ in 0..<count { entries.append(try r.lengthPrefixed()) }
        guard r.isAtEnd else { throw ByteReader.Malformed() }
        return entries
    }
}

extension ExportedItem {
    /// What a format 1 or 2 archived item seals: the whole item, its data included. The
    /// attributes go in as the store coded them, which is the coding
    /// `ItemRecord(archiveBytes:)` reads. Kept for tests of those formats' readers.
    func archiveBytes(data: Data) -> [UInt8] {
        var w = ByteWriter(capacity: 160 + accessGroup.utf8.count + attributes.bytes.count + data.count)
        w.uint8(ItemRecord.archiveFormat)
        w.string(itemClass.rawValue)
        w.uuid(uuid)
        w.string(accessGroup)
        w.string(protection.rawValue)
        w.uint8(synchronizable ? 1 : 0)
        w.accessControl(accessControl)
        w.date(creationDate)
        w.date(modificationDate)
        w.attributes(attributes)
        w.lengthPrefixed(data)
        return w.bytes
    }
}

extension ItemRecord {
    static let archiveFormat: UInt8 = 1

    init(archiveBytes bytes: some Collection<UInt8>) throws {
        var r = ByteReader(Array(bytes))
        guard try r.uint8() == Self.archiveFormat, let itemClass = ItemClass(rawValue: try r.string()) else { throw ByteReader.Malformed() }
        let uuid = try r.uuid()
        let accessGroup = try r.string()
        guard let protection = ProtectionClass(rawValue: try r.string()) else { throw ByteReader.Malformed() }
        let synchronizable = try r.uint8() == 1
        let accessControl = try r.accessControl()
        let created = try r.date()
        let modified = try r.date()
        let attributes = try r.attributes()
        let data = Data(try r.lengthPrefixed())
        guard r.isAtEnd else { throw ByteReader.Malformed() }
        self.init(
            itemClass: itemClass, uuid: uuid, accessGroup: accessGroup, protection: protection, synchronizable: synchronizable,
            accessControl: accessControl, creationDate: created, modificationDate: modified, attributes: attributes, data: data)
    }
}

extension ArchivedItem {
    var encoded: [UInt8] {
        var w = ByteWriter(capacity: 96 + accessGroup.utf8.count + (name?.utf8.count ?? 0) + sealed.count)
        w.uuid(uuid)
        w.string(itemClass.rawValue)
        w.string(protection.rawValue)
        w.uint8(synchronizable ? 1 : 0)
        w.string(accessGroup)
        w.uint8(wrapping == .backup ? 1 : 0)
        w.string(name ?? "")
        w.lengthPrefixed(sealed)
        return w.bytes
    }

    init(decoding bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes)
        uuid = try r.uuid()
        guard let itemClass = ItemClass(rawValue: try r.string()), let protection = ProtectionClass(rawValue: try r.string()) else {
            throw ByteReader.Malformed()
        }
        self.itemClass = itemClass
        self.protection = protection
        synchronizable = try r.uint8() == 1
        accessGroup = try r.string()
        wrapping = try r.uint8() == 1 ? .backup : .device
        let name = try r.string()
        self.name = name.isEmpty ? nil : name
        sealed = Data(try r.lengthPrefixed())
        guard r.isAtEnd else { throw ByteReader.Malformed() }
    }
}

extension SandboxEntry {
    var encoded: [UInt8] {
        var w = ByteWriter()
        w.string(bundleID)
        w.string(path)
        w.string(protection)
        w.uint64(UInt64(offset))
        w.lengthPrefixed(contents)
        return w.bytes
    }

    init(decoding bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes)
        bundleID = try r.string()
        path = try r.string()
        protection = try r.string()
        // A piece of a file lies within the largest file a sandbox holds; beyond, the entry is
        // malformed (and Int(UInt64) would trap).
        guard let offset = Int(exactly: try r.uint64()), offset <= SandboxEntry.maximumOffset else { throw ByteReader.Malformed() }
        self.offset = offset
        contents = Data(try r.lengthPrefixed())
        guard r.isAtEnd else { throw ByteReader.Malformed() }
    }
}
