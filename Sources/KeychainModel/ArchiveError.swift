import Foundation

/// Why an archive cannot be read. Each kind of damage has its own case and sentence, so a user
/// can tell a wrong password from a truncated copy from a flipped byte.
public enum ArchiveError: CodedError, Equatable {
    public static let domain = "archive"

    /// No Keyferry magic at the front.
    case notAnArchive
    /// Written by a newer Keyferry.
    case newerFormat(found: UInt16, supported: UInt16)
    /// The header's bytes do not match its digest, or do not parse.
    case corruptHeader(String)
    /// An encrypted archive and no password, or the wrong one.
    case passwordRequired
    case wrongPassword
    /// The file ends before the manifest: an interrupted copy or write.
    case truncated(afterSections: Int)
    /// A section whose seal or digest does not match: edited, or from another archive.
    case corruptSection(index: Int, kind: String)
    /// A section in another's place: sections swapped, dropped or repeated.
    case misplacedSection(expected: Int, found: Int)
    /// Bytes after the manifest, or a manifest that miscounts the sections.
    case inconsistent(String)
    /// No file at the path given.
    case noSuchFile(String)
    case unreadable(String)
    /// The folder an archive was to be written in does not exist.
    case noSuchDirectory(String)
    /// A file is already where the archive was to be written; nothing replaces it.
    case exists(String)
    case cannotWrite(String)
    /// An archive that claims to be the target's own and that nothing can authenticate (format
    /// 1, unencrypted): anyone can write one, so it is restored only when asked by name.
    case unauthenticated(String)

    public enum Code: String, Sendable {
        case notAnArchive, newerFormat, corruptHeader, passwordRequired, wrongPassword, truncated, corruptSection
        case misplacedSection, inconsistent, noSuchFile, unreadable, noSuchDirectory, exists, cannotWrite, unauthenticated
    }

    public var code: Code {
        switch self {
        case .notAnArchive: .notAnArchive
        case .newerFormat: .newerFormat
        case .corruptHeader: .corruptHeader
        case .passwordRequired: .passwordRequired
        case .wrongPassword: .wrongPassword
        case .truncated: .truncated
        case .corruptSection: .corruptSection
        case .misplacedSection: .misplacedSection
        case .inconsistent: .inconsistent
        case .noSuchFile: .noSuchFile
        case .unreadable: .unreadable
        case .noSuchDirectory: .noSuchDirectory
        case .exists: .exists
        case .cannotWrite: .cannotWrite
        case .unauthenticated: .unauthenticated
        }
    }

    /// A file that is no archive, or not one to take as it is, is input the user must change; a
    /// password is authentication; an archive damaged on the way (truncated, a flipped byte,
    /// sections out of place) and a file that cannot be read or written are failures: changing
    /// the command does not mend them.
    public var kind: ProblemKind {
        switch self {
        case .passwordRequired, .wrongPassword: .authentication
        case .noSuchFile, .noSuchDirectory: .notFound
        case .unreadable, .cannotWrite, .corruptHeader, .truncated, .corruptSection, .misplacedSection, .inconsistent: .failure
        case .notAnArchive, .newerFormat, .exists, .unauthenticated: .invalidInput
        }
    }

    public var message: String { description }

    public var description: String {
        switch self {
        case .notAnArchive:
            "not a Keyferry backup archive (no KFBACKUP header)."
        case .newerFormat(let found, let supported):
            "the archive is format \(found), newer than this Keyferry reads (\(supported)); use a newer keyferry."
        case .corruptHeader(let detail):
            "the archive's header is damaged (\(detail)); the archive cannot be used."
        case .passwordRequired:
            "the archive is encrypted, and no password was given."
        case .wrongPassword:
            "wrong password: it does not open this archive's key."
        case .truncated(let count):
            "the archive is truncated: it ends after \(count) section\(count == 1 ? "" : "s"), before its manifest (an interrupted copy or write)."
        case .corruptSection(let index, let kind):
            "section \(index) (\(kind)) is damaged or was altered: its \(kind == "manifest" ? "digest" : "seal or digest") does not match."
        case .misplacedSection(let expected, let found):
            "section \(found) is where section \(expected) belongs: sections were swapped, dropped or repeated."
        case .inconsistent(let detail):
            "the archive is inconsistent: \(detail)."
        case .noSuchFile(let path):
            "cannot read the archive: there is no file \(path)."
        case .unreadable(let detail):
            "cannot read the archive: \(detail)."
        case .noSuchDirectory(let path):
            "cannot write the archive: the directory \(path) does not exist."
        case .exists(let path):
            "cannot write the archive: \(path) already exists; a backup never replaces a file or directory, so choose a new name."
        case .cannotWrite(let detail):
            "cannot write the archive: \(detail)."
        case .unauthenticated(let detail):
            "the archive cannot be authenticated: \(detail)."
        }
    }
}
