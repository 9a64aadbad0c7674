package import Foundation
import KeychainModel
package import KeychainStore
import KeyferryCompression
package import KeyferryCrypto
import KeyferrySystem
import KeyferryThreads

/// Writes one archive: the header at once, sections as they come, the manifest last. Everything
/// goes to a hidden file beside the destination, renamed into place only by `finish`, so an
/// interrupted backup never leaves a half archive under the real name.
package final class ArchiveWriter {
    package enum Mode: Sendable {
        case encrypted(password: Data, parameters: PasswordHashParameters = .interactive)
        case unencrypted
    }

    package let header: ArchiveHeader
    package let destination: URL
    private let temporary: URL
    private let headerDigest: [UInt8]
    private let keys: SectionKeys
    private let entropy: any EntropySource
    private var handle: FileHandle?
    private var sectionCount: UInt32 = 0

    /// An archive of `device` (whose keys bind an unencrypted archive's sections to it).
    package init(
        to destination: URL, mode: Mode, device: DeviceBackupKeys, deviceName: String, created: Date = Date(),
        entropy: any EntropySource = SystemEntropy()
    ) throws {
        self.destination = destination
        self.entropy = entropy
        let archiveID = Data(entropy.bytes(16))
        var header = ArchiveHeader(mode: .unencrypted, archiveID: archiveID, created: created, deviceID: device.deviceID, deviceName: deviceName)
        var archiveKey: SymmetricKey?
        if case .encrypted(let password, let parameters) = mode {
            let salt = entropy.bytes(PasswordHashParameters.saltByteCount)
            let passwordKey = try PasswordHash.argon2id(password: password, salt: salt, parameters: parameters)
            let key = SymmetricKey(randomFrom: entropy)
            header.mode = .encrypted
            header.passwordHashing = .init(salt: Data(salt), parameters: parameters)
            header.sealedKey = AEAD.wrap(key, under: passwordKey, associatedData: archiveID, entropy: entropy)
            archiveKey = key
        }
        self.header = header

        let body = try JSONEncoder.archive.encode(header)
        var prefix = ArchiveFormat.magic
        prefix += ArchiveFormat.version.bigEndianBytes
        prefix += UInt32(body.count).bigEndianBytes
        prefix += body
        headerDigest = KeyedHash.digest(of: prefix, key: ArchiveFormat.headerDigestKey)
        let items = ItemBinding(header, version: ArchiveFormat.version)
        keys =
            archiveKey.map { SectionKeys(archiveKey: $0, items: items) }
            ?? SectionKeys(headerDigest: headerDigest, device: device.sections, items: items)

        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: destination.deletingLastPathComponent().path, isDirectory: &isDirectory),
            isDirectory.boolValue
        else {
            throw ArchiveError.noSuchDirectory(destination.deletingLastPathComponent().path)
        }
        guard (try? FileManager.default.attributesOfItem(atPath: destination.path)) == nil else {
            throw ArchiveError.exists(destination.path)
        }
        temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(Self.partialPrefix(of: destination) + UUID().uuidString)
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw ArchiveError.cannotWrite("cannot create \(temporary.path) beside the archive")
        }
        handle = try FileHandle(forWritingTo: temporary)
        try write(prefix + headerDigest)
    }

    deinit { abandon() }

    /// Whether a writer is still at work on `destination`: its partial file stands beside it.
    package static func isWriting(_ destination: URL) -> Bool {
        let prefix = partialPrefix(of: destination)
        let beside = (try? FileManager.default.contentsOfDirectory(atPath: destination.deletingLastPathComponent().path)) ?? []
        return beside.contains { $0.hasPrefix(prefix) }
    }

    private static func partialPrefix(of destination: URL) -> String { ".\(destination.lastPathComponent).partial-" }

    /// Encrypted archives: the keys migratable items are wrapped with.
    var backupKeybag: BackupKeybag? { keys.backupKeybag }
    /// What every item's seal is bound to.
    var itemBinding: ItemBinding { keys.items }

    /// Appends one section. Content above `ArchiveFormat.maximumSectionBytes` is refused:
    /// callers write large content as several sections.
    package func append(_ kind: SectionKind, _ content: Data) throws {
        try append(try CompressedSection(kind, content))
    }

    /// Appends a section compressed beforehand, perhaps on another core: compression is most
    /// of a section's cost, and it needs neither the keys nor the section's place.
    package func append(_ section: CompressedSection) throws {
        precondition(section.kind != .manifest, "the manifest is written by finish")
        try appendSection(section)
    }

    /// Writes the manifest (with the section count filled in), flushes to disk and renames the
    /// archive into place.
    @discardableResult
    package func finish(_ manifest: ArchiveManifest) throws -> ArchiveManifest {
        var manifest = manifest
        manifest.sectionCount = Int(sectionCount)
        try appendSection(try CompressedSection(.manifest, try JSONEncoder.archive.encode(manifest)))
        try handle?.synchronize()
        try handle?.close()
        handle = nil
        try putInPlace()
        return manifest
    }

    /// An archive never replaces what appeared at its path while it was written.
    private func putInPlace() throws {
        do {
            try Placement.moveFile(temporary, to: destination)
        } catch {
            abandonFile()
            throw ArchiveError.cannotWrite(
                error.isOccupied
                    ? "\(destination.path) appeared while the backup was written; it was left as it is, and no archive was written"
                    : "cannot put the finished archive at \(destination.path): \(error.reason)")
        }
    }

    /// Drops the unfinished archive (also what happens when the writer is released unfinished).
    package func abandon() {
        guard let handle else { return }
        try? handle.close()
        self.handle = nil
        abandonFile()
    }

    private func abandonFile() { try? FileManager.default.removeItem(at: temporary) }

    private func appendSection(_ section: CompressedSection) throws {
        let (kind, compressed) = (section.kind, section.compressed)
        let index = sectionCount
        let associatedData = SectionKeys.associatedData(headerDigest: headerDigest, kind: kind, index: index)
        let body: Data
        if let sealing = keys.sealing, kind != .manifest {
            body = AEAD.seal(compressed, key: sealing, associatedData: associatedData, entropy: entropy)
        } else {
            let signed = associatedData + compressed
            body =
                compressed + KeyedHash.digest(of: signed, key: keys.digest)
                + (keys.device.map { KeyedHash.digest(of: signed, key: $0) } ?? [])
        }
        var frame = [kind.rawValue]
        frame += index.bigEndianBytes
        frame += UInt64(body.count).bigEndianBytes
        try write(frame)
        try write(body)
        sectionCount += 1
    }

    private func write(_ bytes: some DataProtocol) throws {
        guard let handle else { throw ArchiveError.inconsistent("the archive was already finished or abandoned") }
        try handle.write(contentsOf: bytes)
    }
}

/// A section's content compressed, not yet sealed or placed.
package struct CompressedSection: Sendable {
    package let kind: SectionKind
    let compressed: Data

    /// Content above `ArchiveFormat.maximumSectionBytes` is refused.
    package init(_ kind: SectionKind, _ content: Data) throws {
        guard content.count <= ArchiveFormat.maximumSectionBytes else {
            throw ArchiveError.inconsistent("a \(kind) section of \(content.count) bytes exceeds the \(ArchiveFormat.maximumSectionBytes)-byte limit")
        }
        self.kind = kind
        compressed = try Zstd.compress(content)
    }

    /// Several contents of one kind, compressed on every core, in order.
    static func compressing(_ contents: [Data], as kind: SectionKind) throws -> [CompressedSection] {
        try ParallelMap.map(contents, minimumChunk: 1) { try CompressedSection(kind, $0) }
    }
}
