package import Foundation
package import KeychainModel
package import KeyferryCrypto

/// The fixed facts of a backup archive. The bytes are specified in Protocol/backup.md:
///
///     archive = header, section*, manifest section
///     header  = "KFBACKUP" | version u16 | length u32 | header JSON | header digest (32)
///     section = kind u8 | index u32 | body length u64 | body
///
/// Every integer is big-endian. A section's body is zstd-compressed content, either sealed
/// (XChaCha20-Poly1305) or followed by keyed BLAKE2b digests; all are bound to the header
/// digest, the section's kind and its index, so an edited, swapped or foreign section fails.
package enum ArchiveFormat {
    package static let magic = Array("KFBACKUP".utf8)
    /// The newest format this build reads and the one it writes. Format 2 binds an unencrypted
    /// archive's sections to the device that wrote it, and every item to its archive.
    package static let version: UInt16 = 3
    /// The oldest format this build still reads: format 1's unencrypted archives are checked
    /// for damage only, wherever they are read.
    package static let oldestReadableVersion: UInt16 = 1
    /// The most content one section holds; larger content spans several sections of one kind,
    /// so neither writer nor reader holds more than this at once.
    package static let maximumSectionBytes = 4 << 20

    /// The most bytes an archive's sections may hold once decompressed: 4,096 times the file's
    /// size, and at least 256 MiB. Items and files compress a few times over; a crafted file of
    /// compressed zeros would otherwise ask a reader for gigabytes from kilobytes.
    static func maximumContentBytes(fileBytes: UInt64) -> UInt64 {
        max(256 << 20, fileBytes.multipliedReportingOverflow(by: 4096).overflow ? .max : fileBytes * 4096)
    }

    /// Items a restore takes from one archive: far more than any keychain holds, and a bound on
    /// what its report keeps.
    static let maximumItems = 1_000_000
    /// Longest header accepted, so a corrupt length cannot make a reader allocate gigabytes.
    static let maximumHeaderBytes = 1 << 20
    static let digestByteCount = 32
    /// kind, index, body length.
    static let sectionFrameByteCount = 1 + 4 + 8

    /// The header digest's key: public, so it detects damage rather than forgery. Forgery is
    /// caught by the sealed sections (encrypted archives) and by the device-bound wrapping of
    /// every keychain item (both kinds).
    static let headerDigestKey = try! SymmetricKey(bytes: Array("keyferry backup header digest 01".utf8))
}

/// What a section holds.
package enum SectionKind: UInt8, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// The installed apps: bundle ID, team, access groups.
    case apps = 1
    /// Keychain items, in batches.
    case keychain = 2
    /// Sandbox files of the apps, in batches.
    case sandbox = 3
    /// The last section: what the archive holds, counted. Plain in both modes, so that
    /// `backup inspect` reads it without the password.
    case manifest = 0xFF

    package var description: String {
        switch self {
        case .apps: "apps"
        case .keychain: "keychain"
        case .sandbox: "sandbox"
        case .manifest: "manifest"
        }
    }
}

/// The public facts at the front of an archive, readable without the password.
package struct ArchiveHeader: Codable, Equatable, Sendable {
    package var mode: ArchiveMode
    /// 16 random bytes naming this archive; bound into the sealed archive key and (format 2)
    /// into every item's seal.
    package var archiveID: Data
    package var created: Date
    package var deviceID: UUID
    package var deviceName: String
    /// Encrypted archives: how the password becomes the key that opens `sealedKey`.
    package var passwordHashing: PasswordHashing?
    /// Encrypted archives: the archive key, sealed under the password's key.
    package var sealedKey: Data?

    package struct PasswordHashing: Codable, Equatable, Sendable {
        package var algorithm = Self.argon2id
        /// libsodium's Argon2id, version 1.3: the only one Keyferry writes or reads.
        static let argon2id = "argon2id13"
        package var salt: Data
        package var parameters: PasswordHashParameters
    }
}

/// The last section: counts for `backup inspect`, and the number of sections before it, so a
/// reader knows it has seen them all.
package struct ArchiveManifest: Codable, Equatable, Sendable {
    /// Sections before the manifest.
    package var sectionCount: Int
    /// Free-form counts by name (`items.genp.ak`, `apps`, `sandboxFiles` ...).
    package var counts: [String: Int]
    /// What a reader of this archive should know (a plaintext secret in a sandbox ...).
    package var warnings: [String]

    package init(sectionCount: Int = 0, counts: [String: Int] = [:], warnings: [String] = []) {
        self.sectionCount = sectionCount
        self.counts = counts
        self.warnings = warnings
    }
}

/// The keys a header leads to. Encrypted: the archive key, opened with the password.
/// Unencrypted: a checksum key anyone can compute from the header, and on the device that
/// wrote it, that device's section key.
struct SectionKeys: Sendable {
    /// nil for unencrypted archives.
    let sealing: SymmetricKey?
    /// Encrypted: the manifest's digest key. Unencrypted: the checksum key.
    let digest: SymmetricKey
    /// Unencrypted archives read (or written) on their device: the key of the second digest.
    let device: SymmetricKey?
    /// Encrypted archives: the keys migratable items are wrapped with.
    let backupKeybag: BackupKeybag?
    /// What each item's seal is bound to.
    let items: ItemBinding

    init(archiveKey: SymmetricKey, items: ItemBinding) {
        sealing = archiveKey.derive(context: "kfsealsc")
        digest = archiveKey.derive(context: "kfdigest")
        device = nil
        backupKeybag = BackupKeybag(archiveKey: archiveKey)
        self.items = items
    }

    init(headerDigest: [UInt8], device: SymmetricKey?, items: ItemBinding) {
        sealing = nil
        digest = try! SymmetricKey(bytes: headerDigest)
        self.device = device
        backupKeybag = nil
        self.items = items
    }

    /// What every section's seal or digest is bound to.
    static func associatedData(headerDigest: [UInt8], kind: SectionKind, index: UInt32) -> [UInt8] {
        var bytes = headerDigest
        bytes.append(kind.rawValue)
        bytes.append(contentsOf: index.bigEndianBytes)
        return bytes
    }
}

extension FixedWidthInteger {
    var bigEndianBytes: [UInt8] { withUnsafeBytes(of: bigEndian) { Array($0) } }

    init(bigEndianBytes bytes: some Collection<UInt8>) {
        self = bytes.reduce(0) { $0 << 8 | Self($1) }
    }
}

extension JSONEncoder {
    /// Sorted keys, so the same header is the same bytes: archives are reproducible from a seed.
    static let archive: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
}
