import AppleFormats
import Crypto
import Foundation
import Testing

@Suite("MBFile records of Manifest.db")
struct BackupFileRecordTests {
    static let key = ClassWrappedKey(protectionClass: 3, wrapped: [UInt8](repeating: 0xAB, count: 40))

    @Test("a file's archive: the MBFile at $objects[1], its key and class objects in a phone's order, and back through bplist bytes")
    func file() throws {
        var record = BackupFileRecord(relativePath: "Documents/notes.txt", size: 42, mode: 0o100644, protectionClass: 3, encryptionKey: Self.key)
        record.lastModified = 1_800_000_000
        let archive = record.keyedArchive
        let objects = try #require(archive["$objects"]?.array)
        #expect(objects.count == 6 && objects[0].string == "$null" && objects[2].string == "Documents/notes.txt")
        #expect(objects[1]["RelativePath"]?.uid == 2 && objects[1]["EncryptionKey"]?.uid == 3 && objects[1]["$class"]?.uid == 5)
        #expect(objects[3]["NS.data"]?.data == Data(Self.key.bytes) && objects[4]["$classname"]?.string == "NSMutableData")
        #expect(objects[5]["$classname"]?.string == "MBFile")
        let read = try BackupFileRecord(keyedArchive: try BinaryPropertyList.decode(BinaryPropertyList.encode(archive)))
        #expect(read == record && read.isRegularFile)
    }

    @Test("a directory has no key, and MBFile's class follows its path")
    func directory() throws {
        let record = BackupFileRecord(relativePath: "Documents", size: 0, mode: 0o040755, protectionClass: 0, encryptionKey: nil)
        let objects = try #require(record.keyedArchive["$objects"]?.array)
        #expect(objects.count == 4 && objects[1]["EncryptionKey"] == nil && objects[1]["$class"]?.uid == 3)
        #expect(try BackupFileRecord(keyedArchive: record.keyedArchive) == record)
        #expect(record.isDirectory)
    }

    @Test("read leniently: NS.data behind a UID, no ProtectionClass (the key's prefix says it); refused without a root or a path")
    func lenient() throws {
        let archive: PropertyList = .dictionary([
            "$top": .dictionary(["root": .uid(1)]),
            "$objects": .array([
                .string("$null"), .dictionary(["RelativePath": .uid(2), "Size": .integer(7), "Mode": .integer(0o100600), "EncryptionKey": .uid(3)]),
                .string("Library/Preferences/com.example.mail.plist"), .dictionary(["NS.data": .uid(4)]), .data(Data(Self.key.bytes)),
            ]),
        ])
        let read = try BackupFileRecord(keyedArchive: archive)
        #expect(read.protectionClass == 3 && read.encryptionKey == Self.key && read.lastModified == 0)
        #expect(throws: PropertyListError.self) { try BackupFileRecord(keyedArchive: .dictionary(["$objects": .array([])])) }
        #expect(throws: PropertyListError.self) {
            try BackupFileRecord(keyedArchive: .dictionary(["$top": .dictionary(["root": .uid(1)]), "$objects": .array([.null, .dictionary([:])])]))
        }
        #expect(throws: PropertyListError.self) {
            try BackupFileRecord(keyedArchive: .dictionary(["$top": .dictionary(["root": .uid(99)]), "$objects": .array([.null])]))
        }
    }
}
