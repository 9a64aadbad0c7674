import AppleFormats
import Foundation
import GRDB

/// One row of `Manifest.db`'s `Files` table (`IOS-BACKUP.md`, section 5).
struct ManifestRow: Sendable {
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
enum ManifestDatabase {
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

    /// Every row of the decrypted database at `path`, in domain and path order, at most `maximumRows`. A database that
    /// SQLite cannot read, a missing column or an oversized record is malformed.
    static func read(_ path: URL, maximumRows: Int) throws -> [ManifestRow] {
        var configuration = Configuration()
        configuration.readonly = true
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path.path, configuration: configuration)
        } catch {
            throw PhoneBackupError.malformed("Manifest.db does not open as a database (\(error)); a wrong key, or damage")
        }
        defer { try? queue.close() }
        do {
            return try queue.read { db in
                let rows = try Row.fetchCursor(db, sql: "SELECT fileID, domain, relativePath, flags, file FROM Files ORDER BY domain, relativePath")
                var result: [ManifestRow] = []
                while let row = try rows.next() {
                    guard result.count < maximumRows else { throw PhoneBackupError.malformed("Manifest.db has more than \(maximumRows) rows") }
                    guard let fileID = row["fileID"] as String?, let domain = row["domain"] as String?, let path = row["relativePath"] as String?,
                        let flags = row["flags"] as Int64?
                    else {
                        throw PhoneBackupError.malformed("a row of Manifest.db lacks its id, domain, path or flags")
                    }
                    let blob = (row["file"] as Data?) ?? Data()
                    guard blob.count <= maximumRecordBytes else {
                        throw PhoneBackupError.malformed("the record of \(domain)-\(path) is \(blob.count) bytes, more than \(maximumRecordBytes)")
                    }
                    let record: BackupFileRecord
                    do {
                        record = try BackupFileRecord(keyedArchive: try BinaryPropertyList.decode(blob))
                    } catch {
                        throw PhoneBackupError.malformed("the record of \(domain)-\(path): \(error)")
                    }
                    result.append(ManifestRow(fileID: fileID, domain: domain, relativePath: path, flags: flags, file: record))
                }
                return result
            }
        } catch let error as PhoneBackupError {
            throw error
        } catch {
            throw PhoneBackupError.malformed("Manifest.db cannot be read: \(error)")
        }
    }
}
