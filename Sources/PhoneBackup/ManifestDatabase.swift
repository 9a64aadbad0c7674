import AppleFormats
package import Foundation
import GRDB
import KeychainModel
import KeyferrySystem

/// One row of `Manifest.db`'s `Files` table (`IOS-BACKUP.md`, section 5).
package struct ManifestRow: Sendable {
    static let regularFile: Int64 = 1
    static let directory: Int64 = 2
    static let symbolicLink: Int64 = 4

    var fileID: String
    var domain: String
    var relativePath: String
    var flags: Int64
    var file: BackupFileRecord
}

/// `Manifest.db` in plain SQLite: written beside the backup, then sealed into place; read from
/// a private copy opened read-only.
package enum ManifestDatabase {
    /// The largest `file` column read: iphone-backup-decrypt refuses more than 100 KiB, and an
    /// MBFile is a few hundred bytes.
    static let maximumRecordBytes = 100 << 10

    static func write(_ rows: [ManifestRow], to path: URL) throws {
        let queue = try DatabaseQueue(path: path.path)
        try queue.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE Files (fileID TEXT PRIMARY KEY, domain TEXT, relativePath TEXT, flags INTEGER, file BLOB);
                    CREATE INDEX FilesDomainIdx ON Files(domain);
                    CREATE INDEX FilesRelativePathIdx ON Files(relativePath);
                    CREATE INDEX FilesFlagsIdx ON Files(flags);
                    CREATE TABLE Properties (key TEXT PRIMARY KEY, value BLOB);
                    """)
            let insert = try db.makeStatement(sql: "INSERT INTO Files (fileID, domain, relativePath, flags, file) VALUES (?, ?, ?, ?, ?)")
            for row in rows {
                try insert.execute(arguments: [
                    row.fileID, row.domain, row.relativePath, row.flags, BinaryPropertyList.encode(row.file.keyedArchive),
                ])
            }
        }
        try queue.close()
    }

    /// The first bytes of every SQLite database (an array: the leak checker of scripts/fuzz cannot
    /// follow a global Data to its storage).
    static let sqliteHeader = Array("SQLite format 3\0".utf8)

    /// What `read` found: the rows, and the rows whose record does not decode, by name (escaped).
    package struct Contents {
        package var rows: [ManifestRow]
        package var unreadable: [String]
    }

    /// Every row of a decrypted `Manifest.db`, in domain and path order, at most `maximumRows`;
    /// a row whose record (its MBFile) does not decode is named in `unreadable`, not failed on,
    /// as readers of phones' backups skip it.
    ///
    /// The database is the backup author's, so it is read as hostile: SQLite opens a private
    /// copy that is unlinked as soon as it is open (nothing decrypted outlives the read, even a
    /// killed one), `Files` must be a plain table (a view, trigger, virtual table or generated
    /// column would run the author's SQL), and each row is a step of a scan bounded by the
    /// file's size, between which `checkpoint` may stop the read. A database that SQLite cannot
    /// read, a missing column or an oversized record is malformed.
    package static func read(_ plain: Data, maximumRows: Int, checkpoint: () throws -> Void) throws -> Contents {
        let queue = try PrivateCopy.open(plain)
        defer { try? queue.close() }
        do {
            return try queue.read { db in
                try requirePlainFilesTable(db)
                var result = Contents(rows: [], unreadable: [])
                let rows = try Row.fetchCursor(db, sql: "SELECT fileID, domain, relativePath, flags, file FROM Files")
                var count = 0
                while let row = try rows.next() {
                    try checkpoint()
                    count += 1
                    guard count <= maximumRows else { throw PhoneBackupError.malformed("Manifest.db has more than \(maximumRows) rows") }
                    switch try manifestRow(row) {
                    case .success(let row): result.rows.append(row)
                    case .failure(let unreadable): result.unreadable.append(unreadable.name)
                    }
                }
                // Sorted here rather than by SQLite: the order costs no work the author can choose.
                result.rows.sort { ($0.domain, $0.relativePath) < ($1.domain, $1.relativePath) }
                return result
            }
        } catch let error as PhoneBackupError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw PhoneBackupError.malformed("Manifest.db cannot be read: \(error)")
        }
    }

    /// `Files` as a phone writes it, a table of stored columns; nothing in the schema that runs
    /// SQL when it is read.
    private static func requirePlainFilesTable(_ db: Database) throws {
        try db.execute(sql: "PRAGMA trusted_schema = OFF")
        let schema = try Row.fetchAll(db, sql: "SELECT type, name, sql FROM sqlite_master")
        for entry in schema {
            let type = entry["type"] as String? ?? ""
            guard type == "table" || type == "index" else {
                throw PhoneBackupError.malformed("Manifest.db holds a \(type.escapingControlCharacters.prefix(20)), which a phone's never does")
            }
        }
        guard let files = schema.first(where: { $0["name"] as String? == "Files" && $0["type"] as String? == "table" }) else {
            throw PhoneBackupError.malformed("Manifest.db has no Files table")
        }
        let sql = (files["sql"] as String? ?? "").uppercased()
        guard !sql.hasPrefix("CREATE VIRTUAL") else { throw PhoneBackupError.malformed("Manifest.db's Files is a virtual table") }
        // `hidden` 2 and 3 are generated columns: expressions evaluated on every read.
        let columns = try Row.fetchAll(db, sql: "PRAGMA table_xinfo(Files)")
        guard columns.allSatisfy({ ($0["hidden"] as Int64? ?? 0) < 2 }) else {
            throw PhoneBackupError.malformed("Manifest.db's Files has generated columns")
        }
        let names = Set(columns.compactMap { $0["name"] as String? })
        for needed in ["fileID", "domain", "relativePath", "flags", "file"] where !names.contains(needed) {
            throw PhoneBackupError.malformed("Manifest.db's Files has no \(needed) column")
        }
    }

    /// A row whose record does not decode: `name` says which and why.
    struct UnreadableRecord: Error {
        var name: String
    }

    private static func manifestRow(_ row: Row) throws -> Result<ManifestRow, UnreadableRecord> {
        guard let fileID = row["fileID"] as String?, let domain = row["domain"] as String?, let path = row["relativePath"] as String?,
            let flags = row["flags"] as Int64?
        else {
            throw PhoneBackupError.malformed("a row of Manifest.db lacks its id, domain, path or flags")
        }
        let name = "\(domain)-\(path)".escapingControlCharacters
        let blob = (row["file"] as Data?) ?? Data()
        guard blob.count <= maximumRecordBytes else {
            return .failure(UnreadableRecord(name: "\(name) (a record of \(blob.count) bytes, more than \(maximumRecordBytes))"))
        }
        do {
            let record = try BackupFileRecord(keyedArchive: try BinaryPropertyList.decode(blob))
            return .success(ManifestRow(fileID: fileID, domain: domain, relativePath: path, flags: flags, file: record))
        } catch {
            return .failure(UnreadableRecord(name: "\(name) (\(error))"))
        }
    }
}

/// A decrypted `Manifest.db` where SQLite can open it and nobody else finds it: written to a
/// private folder, opened, then unlinked, so that only the open descriptor holds it. Folders
/// left by a reader killed in the instant between are removed by the next one.
enum PrivateCopy {
    static let prefix = "keyferry-manifest-"

    static func open(_ plain: Data) throws -> DatabaseQueue {
        removeAbandoned()
        var bytes = plain
        // A database in WAL mode (header bytes 18 and 19 are 2) wants its -wal and -shm files
        // beside it; a backup's copy has none, so it is read as a rollback-journal database.
        if bytes.count >= 100, bytes.starts(with: ManifestDatabase.sqliteHeader), bytes[bytes.startIndex + 18] == 2 {
            bytes[bytes.startIndex + 18] = 1
            bytes[bytes.startIndex + 19] = 1
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)\(ProcessControl.currentID)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("Manifest.db")
        guard FileManager.default.createFile(atPath: path.path, contents: bytes, attributes: [.posixPermissions: 0o600]) else {
            throw PhoneBackupError.malformed("cannot write a private copy of Manifest.db in \(folder.path)")
        }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: path.path, configuration: configuration)
            // The first read opens the file; from then on the descriptor is all it needs.
            _ = try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
            return queue
        } catch {
            throw PhoneBackupError.malformed("Manifest.db does not open as a database (\(error)); a wrong key, or damage")
        }
    }

    /// Folders of readers that are no longer running.
    static func removeAbandoned() {
        let temporary = FileManager.default.temporaryDirectory
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix(prefix) {
            let owner = name.dropFirst(prefix.count).split(separator: "-").first.flatMap { Int32($0) }
            if let owner, ProcessControl.isAlive(owner) { continue }
            try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
        }
    }
}
