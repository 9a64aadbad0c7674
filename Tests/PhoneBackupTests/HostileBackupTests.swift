import AppleFormats
import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

@testable import PhoneBackup

/// Backups written to harm: each is a clear error (or an item reported, where the rest of the
/// backup is sound), and the target is left byte for byte as it was.
@Suite("Hostile iOS backups")
struct HostileBackupTests {
    /// A source, its backup (unencrypted unless asked: its Manifest.db is plain SQLite, so rows
    /// can be rewritten), and a powered-off target whose bytes are recorded.
    struct Setup {
        let source: TestDevice
        let target: TestDevice
        let folder: URL
        let before: [String: Data]

        init(encrypted: Bool = false) throws {
            source = try PhoneBackupTests.source()
            folder = try PhoneBackupTests.write(source, encrypted: encrypted)
            target = try TestDevice(seed: 9)
            target.device.powerOff()
            before = try deviceSnapshot(target.directory)
        }

        /// Restores onto the target and returns the error, checking the target is untouched.
        func refusal(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            do {
                _ = try restore()
            } catch {
                #expect(try deviceSnapshot(target.directory) == before, "the target changed", sourceLocation: sourceLocation)
                let siblings = try FileManager.default.contentsOfDirectory(atPath: target.directory.deletingLastPathComponent().path)
                #expect(siblings.filter { $0.hasPrefix(".") }.isEmpty, "a copy was left: \(siblings)", sourceLocation: sourceLocation)
                return "\(error)"
            }
            Issue.record("the restore went through", sourceLocation: sourceLocation)
            return ""
        }

        /// Restores onto the target; an unencrypted backup as the user who vouches for it.
        func restore() throws -> RestoreReport {
            try PhoneRestore.restore(
                folder, password: PhoneBackupTests.password, to: target.directory, passcode: TestDevice.defaultPasscode,
                acceptingUnauthenticated: true)
        }

        /// Rewrites the (plain) Manifest.db.
        func editManifest(_ body: (Database) throws -> Void) throws {
            let queue = try DatabaseQueue(path: folder.appendingPathComponent("Manifest.db").path)
            try queue.write(body)
            try queue.close()
        }

        /// Rewrites one row's MBFile.
        func editRecord(domain: String, path: String, _ body: (inout BackupFileRecord) -> Void) throws {
            try editManifest { db in
                let blob = try #require(
                    try Data.fetchOne(db, sql: "SELECT file FROM Files WHERE domain = ? AND relativePath = ?", arguments: [domain, path]))
                var record = try BackupFileRecord(keyedArchive: try BinaryPropertyList.decode(blob))
                body(&record)
                try db.execute(
                    sql: "UPDATE Files SET file = ? WHERE domain = ? AND relativePath = ?",
                    arguments: [BinaryPropertyList.encode(record.keyedArchive), domain, path])
            }
        }

        func blob(domain: String, path: String) -> URL {
            let id = BackupFileCrypto.fileID(domain: domain, relativePath: path)
            return folder.appendingPathComponent("\(id.prefix(2))/\(id)")
        }
    }

    static let app = "AppDomain-\(TestDevice.appID)"

    @Test(
        "a Documents path that climbs out, is absolute inside Documents, or has empty or '.' parts is refused",
        arguments: [
            "Documents/../../../../tmp/keyferry-escaped", "Documents//notes", "Documents/./today.txt", "Documents/a/../../x",
        ])
    func escapingPaths(path: String) throws {
        let setup = try Setup()
        try setup.editManifest { db in
            try db.execute(sql: "UPDATE Files SET relativePath = ? WHERE relativePath = 'Documents/notes/today.txt'", arguments: [path])
        }
        #expect(try setup.refusal().contains("escapes the app's sandbox"))
        #expect(!FileManager.default.fileExists(atPath: "/tmp/keyferry-escaped"))
    }

    @Test("a file id that is not forty hex digits never names a path")
    func fileIDs() throws {
        let setup = try Setup()
        try setup.editManifest { db in
            try db.execute(sql: "UPDATE Files SET fileID = '../../../../etc/passwd' WHERE relativePath = 'Documents/notes/today.txt'")
        }
        #expect(try setup.refusal().contains("is not forty lowercase hex digits"))
    }

    @Test("a blob, or its folder, that is a symbolic link is refused, not followed")
    func symbolicLinks() throws {
        let setup = try Setup()
        let secret = setup.folder.deletingLastPathComponent().appendingPathComponent("outside-secret")
        try Data("not the backup's".utf8).write(to: secret)
        let blob = setup.blob(domain: Self.app, path: "Documents/notes/today.txt")
        try FileManager.default.removeItem(at: blob)
        try FileManager.default.createSymbolicLink(at: blob, withDestinationURL: secret)
        #expect(try setup.refusal().contains("is a symbolic link"))

        let other = try Setup()
        let folder = other.blob(domain: Self.app, path: "Documents/notes/today.txt").deletingLastPathComponent()
        let moved = other.folder.deletingLastPathComponent().appendingPathComponent("moved-away")
        try FileManager.default.moveItem(at: folder, to: moved)
        try FileManager.default.createSymbolicLink(at: folder, withDestinationURL: moved)
        #expect(try other.refusal().contains("is a symbolic link"))
    }

    @Test("symbolic-link and directory rows are never written; files of other domains are counted, not restored")
    func linksAndOtherDomains() throws {
        let setup = try Setup()
        try setup.editManifest { db in
            var link = BackupFileRecord(relativePath: "Documents/link", size: 0, mode: 0o120777, protectionClass: 0, encryptionKey: nil)
            link.inode = 99
            try db.execute(
                sql: "INSERT INTO Files VALUES (?, ?, 'Documents/link', 4, ?)",
                arguments: [BackupFileCrypto.fileID(domain: Self.app, relativePath: "Documents/link"), Self.app, BinaryPropertyList.encode(link.keyedArchive)])
            try db.execute(sql: "UPDATE Files SET domain = 'HomeDomain' WHERE relativePath = 'Documents/empty'")
        }
        let report = try setup.restore()
        #expect(report.sandboxFiles == 2)
        #expect(report.filesNotRestored == ["HomeDomain": 1])
        let device = try Device.powerOn(at: setup.target.directory)
        defer { device.powerOff() }
        try device.unlock(passcode: TestDevice.defaultPasscode)
        #expect(try device.sandbox(for: TestDevice.appID).files().map(\.path) == ["notes/today.txt"])
    }

    @Test("a 100 MiB Size on a small blob: the contents are the truth, verify names the difference")
    func staleSize() throws {
        let setup = try Setup(encrypted: true)
        // Encrypted Manifest.db: rewrite it through the reader's own keys.
        let opened = try PhoneBackupReader(folder: setup.folder).open(password: PhoneBackupTests.password, device: nil)
        var rows = opened.rows
        let index = try #require(rows.firstIndex { $0.relativePath == "Documents/notes/today.txt" })
        rows[index].file.size = 100 << 20
        try Self.reseal(rows, in: setup.folder, opened: opened)
        let verified = try PhoneBackupReader(folder: setup.folder).open(password: PhoneBackupTests.password, device: nil).verify()
        #expect(verified.sizeMismatches == ["\(Self.app)-Documents/notes/today.txt"])
        #expect(try setup.restore().sandboxFiles == 3)
    }

    @Test("a truncated blob, or one whose padding does not check, fails the restore by name")
    func damagedBlobs() throws {
        let truncated = try Setup(encrypted: true)
        let blob = truncated.blob(domain: Self.app, path: "Documents/notes/today.txt")
        try Data(try Data(contentsOf: blob).prefix(10)).write(to: blob)
        #expect(try truncated.refusal().contains("Documents/notes/today.txt does not decrypt"))

        let flipped = try Setup(encrypted: true)
        let other = flipped.blob(domain: Self.app, path: "Documents/notes/today.txt")
        var bytes = try Data(contentsOf: other)
        // In CBC, a byte of the block before the last flips the same byte of the last block's
        // plaintext: here the padding byte (1 to 16), which then never checks. A flipped byte of
        // the last block itself garbles it at random, and one time in about 256 the padding holds.
        try #require(bytes.count >= 32)
        bytes[bytes.count - 17] ^= 0x55
        try bytes.write(to: other)
        #expect(try flipped.refusal().contains("does not decrypt"))
    }

    @Test("a keychain-backup.plist that is not a property list is refused, the target as it was")
    func garbageKeychain() throws {
        let setup = try Setup()
        let plist = setup.blob(domain: "KeychainDomain", path: "keychain-backup.plist")
        try Data("bplist00 and then nothing a plist holds".utf8).write(to: plist)
        #expect(try setup.refusal().contains("keychain-backup.plist"))
    }

    @Test("an item whose tag does not match, or of an unknown class, is reported; the rest restores")
    func damagedItems() throws {
        // Unencrypted, onto the device that wrote it: keychain-backup.plist is in plain.
        let source = try PhoneBackupTests.source()
        let folder = try PhoneBackupTests.write(source, encrypted: false)
        let id = BackupFileCrypto.fileID(domain: "KeychainDomain", relativePath: "keychain-backup.plist")
        let plistURL = folder.appendingPathComponent("\(id.prefix(2))/\(id)")
        var keychain = try KeychainBackupPlist(propertyList: try BinaryPropertyList.decode(try Data(contentsOf: plistURL)))
        var rows = try #require(keychain.entries["genp"])
        rows[0].data[rows[0].data.count - 1] ^= 0x01
        rows[1].data[4] = 13
        keychain.entries["genp"] = rows
        try BinaryPropertyList.encode(keychain.propertyList).write(to: plistURL)
        source.device.powerOff()
        let report = try PhoneRestore.restore(
            folder, password: nil, to: source.directory, passcode: TestDevice.defaultPasscode, acceptingUnauthenticated: true)
        #expect(report.items.filter { $0.reason == .damaged }.count == 1)
        #expect(report.items.filter { $0.reason == .unsupported }.count == 1)
        #expect(report.restoredCount == 6)
    }

    @Test("an unfinished snapshot, a missing Manifest.plist, an absurd round count or a deep plist is refused before any work")
    func manifests() throws {
        let unfinished = try Setup()
        let status: PropertyList = .dictionary(["SnapshotState": .string("uploading")])
        try BinaryPropertyList.encode(status).write(to: unfinished.folder.appendingPathComponent("Status.plist"))
        #expect(try unfinished.refusal().contains("not finished"))

        let missing = try Setup()
        try FileManager.default.removeItem(at: missing.folder.appendingPathComponent("Manifest.plist"))
        #expect(try missing.refusal().contains("Manifest.plist is missing"))

        let absurd = try Setup(encrypted: true)
        let manifestURL = absurd.folder.appendingPathComponent("Manifest.plist")
        var manifest = try #require(try BinaryPropertyList.decode(try Data(contentsOf: manifestURL)).dictionary)
        var keybag = try BackupKeybag(tlv: try #require(manifest["BackupKeyBag"]?.data))
        keybag.dataProtectionIterations = 4_000_000_000
        manifest["BackupKeyBag"] = .data(keybag.tlv)
        try BinaryPropertyList.encode(.dictionary(manifest)).write(to: manifestURL)
        let started = ContinuousClock.now
        #expect(try absurd.refusal().contains("rounds of key derivation"))
        #expect(ContinuousClock.now - started < .seconds(30), "refused before deriving anything")

        let deep = try Setup()
        var nested: PropertyList = .string("bottom")
        for _ in 0..<200 { nested = .array([nested]) }
        var deepManifest = try #require(try BinaryPropertyList.decode(try Data(contentsOf: deep.folder.appendingPathComponent("Manifest.plist"))).dictionary)
        deepManifest["Applications"] = nested
        try BinaryPropertyList.encode(.dictionary(deepManifest)).write(to: deep.folder.appendingPathComponent("Manifest.plist"))
        #expect(try deep.refusal().contains("Manifest.plist"))
    }

    @Test("Applications naming something that is not a bundle ID is refused")
    func badApplications() throws {
        let setup = try Setup()
        let url = setup.folder.appendingPathComponent("Manifest.plist")
        var manifest = try #require(try BinaryPropertyList.decode(try Data(contentsOf: url)).dictionary)
        manifest["Applications"] = .dictionary(["../../evil": .dictionary([:])])
        try BinaryPropertyList.encode(.dictionary(manifest)).write(to: url)
        #expect(try setup.refusal().contains("not a bundle ID"))
    }

    @Test(
        "a Manifest.db whose Files runs the author's SQL (a view over an endless recursive query, a trigger, a generated column, a virtual table) is refused at once",
        arguments: [
            """
            ALTER TABLE Files RENAME TO RealFiles;
            CREATE VIEW Files AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)
                SELECT fileID, domain, relativePath, flags, file FROM RealFiles, c WHERE x < 0;
            """,
            "CREATE TRIGGER noisy AFTER INSERT ON Files BEGIN SELECT 1; END;",
            """
            ALTER TABLE Files RENAME TO RealFiles;
            CREATE TABLE Files (fileID TEXT, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB,
                huge TEXT GENERATED ALWAYS AS (printf('%.*c', 1000000000, 'x')) VIRTUAL);
            """,
            """
            ALTER TABLE Files RENAME TO RealFiles;
            CREATE VIRTUAL TABLE Files USING fts4(fileID, domain, relativePath, flags, file);
            """,
        ])
    func hostileSchemas(sql: String) throws {
        let setup = try Setup()
        try setup.editManifest { db in try db.execute(sql: sql) }
        let started = ContinuousClock.now
        let refusal = try setup.refusal()
        #expect(refusal.contains("Manifest.db"), "\(refusal)")
        #expect(ContinuousClock.now - started < .seconds(30), "refused before any of its SQL ran")
    }

    @Test("Manifest.db's private copy is gone from disk once SQLite has it open; an interrupt stops a read; abandoned copies are removed")
    func privateCopy() throws {
        let setup = try Setup()
        let plain = try Data(contentsOf: setup.folder.appendingPathComponent("Manifest.db"))
        // A copy left by a reader that was killed: its process is gone, so the next read removes it.
        let abandoned = FileManager.default.temporaryDirectory.appendingPathComponent("\(PrivateCopy.prefix)2147483600-abandoned")
        try FileManager.default.createDirectory(at: abandoned, withIntermediateDirectories: true)
        try Data("decrypted".utf8).write(to: abandoned.appendingPathComponent("Manifest.db"))
        let queue = try PrivateCopy.open(plain)
        // Only the open descriptor holds the decrypted database: neither the file nor its folder is left.
        #expect(!FileManager.default.fileExists(atPath: queue.path))
        #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: queue.path).deletingLastPathComponent().path))
        #expect(try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM Files") } ?? 0 > 0)
        try queue.close()
        #expect(!FileManager.default.fileExists(atPath: abandoned.path))

        var rowsSeen = 0
        #expect(throws: CancellationError.self) {
            try PhoneBackupReader(folder: setup.folder).open(password: nil, device: nil) {
                rowsSeen += 1
                if rowsSeen == 2 { throw CancellationError() }
            }
        }
        #expect(rowsSeen == 2)
    }

    @Test("a blob, Manifest.db or Manifest.plist that is a FIFO is refused at once, never waited on")
    func fifos() throws {
        for name in ["blob", "Manifest.db", "Manifest.plist"] {
            let setup = try Setup()
            let url = name == "blob" ? setup.blob(domain: Self.app, path: "Documents/notes/today.txt") : setup.folder.appendingPathComponent(name)
            try FileManager.default.removeItem(at: url)
            let mkfifo = Process()
            mkfifo.executableURL = URL(fileURLWithPath: "/usr/bin/mkfifo")
            mkfifo.arguments = [url.path]
            try mkfifo.run()
            mkfifo.waitUntilExit()
            #expect(try setup.refusal().contains("is a FIFO"), "\(name)")
        }
    }

    /// Writes `rows` as the backup's Manifest.db, sealed under its own Manifest key again.
    static func reseal(_ rows: [ManifestRow], in folder: URL, opened: OpenedPhoneBackup) throws {
        let plain = folder.appendingPathComponent("plain.db")
        try ManifestDatabase.write(rows, to: plain)
        let key = try #require(opened.manifest.manifestKey)
        let databaseKey = try key.unwrap(with: try #require(opened.classKeys[key.protectionClass]))
        try BackupFileCrypto.seal(try Data(contentsOf: plain), key: databaseKey).write(to: folder.appendingPathComponent("Manifest.db"))
        try FileManager.default.removeItem(at: plain)
    }
}
