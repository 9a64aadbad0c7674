import Foundation

/// One row's `file` column in an iOS backup's Manifest.db: an `MBFile`, as NSKeyedArchiver
/// writes it (`IOS-BACKUP.md`, section 6). Written in a phone's object order, since some
/// readers take `$objects[1]` for the MBFile rather than following `$top`; read leniently.
package struct BackupFileRecord: Equatable, Sendable {
    package var relativePath: String
    package var size: Int64
    /// `0o100644` a file, `0o040755` a directory, `0o120xxx` a symbolic link.
    package var mode: Int64
    /// 1–4 for files (the class of `encryptionKey`), 0 for most directories.
    package var protectionClass: Int64
    /// The file's own key, wrapped under its class key; nil for directories and links.
    package var encryptionKey: ClassWrappedKey?
    package var inode: Int64 = 0
    package var userID: Int64 = 501
    package var groupID: Int64 = 501
    /// Unix seconds.
    package var birth: Int64 = 0
    package var lastModified: Int64 = 0
    package var lastStatusChange: Int64 = 0

    package init(relativePath: String, size: Int64, mode: Int64, protectionClass: Int64, encryptionKey: ClassWrappedKey?) {
        self.relativePath = relativePath
        self.size = size
        self.mode = mode
        self.protectionClass = protectionClass
        self.encryptionKey = encryptionKey
    }

    package var isDirectory: Bool { mode & 0o170000 == 0o040000 }
    package var isRegularFile: Bool { mode & 0o170000 == 0o100000 }

    /// The keyed archive: `$null`, the MBFile, its path, then for a file its key and
    /// NSMutableData's class, and MBFile's class last.
    package var keyedArchive: PropertyList {
        var objects: [PropertyList] = [.string("$null"), .null, .string(relativePath)]
        var file: [String: PropertyList] = [
            "RelativePath": .uid(2), "Size": .integer(size), "Mode": .integer(mode), "UserID": .integer(userID), "GroupID": .integer(groupID),
            "InodeNumber": .integer(inode), "Flags": .integer(0), "ProtectionClass": .integer(protectionClass), "Birth": .integer(birth),
            "LastModified": .integer(lastModified), "LastStatusChange": .integer(lastStatusChange),
        ]
        if let encryptionKey {
            file["EncryptionKey"] = .uid(3)
            objects.append(.dictionary(["NS.data": .data(Data(encryptionKey.bytes)), "$class": .uid(4)]))
            objects.append(
                .dictionary(["$classname": .string("NSMutableData"), "$classes": .array(["NSMutableData", "NSData", "NSObject"].map(PropertyList.string))]))
        }
        file["$class"] = .uid(UInt64(objects.count))
        objects.append(.dictionary(["$classname": .string("MBFile"), "$classes": .array([.string("MBFile"), .string("NSObject")])]))
        objects[1] = .dictionary(file)
        return .dictionary([
            "$version": .integer(100_000), "$archiver": .string("NSKeyedArchiver"), "$top": .dictionary(["root": .uid(1)]), "$objects": .array(objects),
        ])
    }

    /// Reads an MBFile archive: the root that `$top` names; `NS.data` inline or by UID; a
    /// missing `ProtectionClass` taken from the key's prefix; missing times as 0.
    package init(keyedArchive archive: PropertyList) throws {
        guard let objects = archive["$objects"]?.array, let root = archive["$top"]?["root"]?.uid, let file = Self.object(root, in: objects),
            file.dictionary != nil
        else {
            throw PropertyListError("not a keyed archive of an MBFile (no $objects, or no root dictionary)")
        }
        func resolved(_ value: PropertyList?) -> PropertyList? { value?.uid.flatMap { Self.object($0, in: objects) } ?? value }
        guard let path = resolved(file["RelativePath"])?.string else { throw PropertyListError("the MBFile has no RelativePath") }
        relativePath = path
        size = file["Size"]?.integer ?? 0
        mode = file["Mode"]?.integer ?? 0
        if let key = resolved(file["EncryptionKey"]) {
            guard let data = resolved(key["NS.data"])?.data else { throw PropertyListError("the MBFile's EncryptionKey holds no data") }
            do {
                encryptionKey = try ClassWrappedKey(bytes: data)
            } catch {
                throw PropertyListError("the MBFile's EncryptionKey: \(error)")
            }
        }
        protectionClass = file["ProtectionClass"]?.integer ?? Int64(encryptionKey?.protectionClass ?? 0)
        inode = file["InodeNumber"]?.integer ?? 0
        userID = file["UserID"]?.integer ?? 501
        groupID = file["GroupID"]?.integer ?? 501
        birth = file["Birth"]?.integer ?? 0
        lastModified = file["LastModified"]?.integer ?? 0
        lastStatusChange = file["LastStatusChange"]?.integer ?? 0
    }

    private static func object(_ uid: UInt64, in objects: [PropertyList]) -> PropertyList? {
        uid < UInt64(objects.count) ? objects[Int(uid)] : nil
    }
}
