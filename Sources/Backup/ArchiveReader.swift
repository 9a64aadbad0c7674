import Foundation
import KeyferryCompression
import KeyferryCrypto

/// Reads an archive front to back, one section in memory at a time, authenticating each before
/// handing it out. Every kind of damage is its own `ArchiveError`.
public struct ArchiveReader {
    public let url: URL
    public let header: ArchiveHeader
    private let headerDigest: [UInt8]
    /// Where the first section starts.
    private let sectionsOffset: UInt64
    /// The file's size, which bounds what its sections may hold decompressed.
    private let fileBytes: UInt64

    /// Reads and checks the header; sections are read by `read` or `unverifiedManifest`.
    public init(contentsOf url: URL) throws {
        self.url = url
        let file = try ArchiveFile(url)
        defer { file.close() }
        guard let magic = try? file.read(ArchiveFormat.magic.count), magic == ArchiveFormat.magic else { throw ArchiveError.notAnArchive }
        let fixed = try file.readHeaderField(6)
        let version = UInt16(bigEndianBytes: fixed.prefix(2))
        guard version <= ArchiveFormat.version else { throw ArchiveError.newerFormat(found: version, supported: ArchiveFormat.version) }
        guard version == ArchiveFormat.version else { throw ArchiveError.corruptHeader("format version \(version)") }
        let length = Int(UInt32(bigEndianBytes: fixed.suffix(4)))
        guard length <= ArchiveFormat.maximumHeaderBytes else { throw ArchiveError.corruptHeader("a header length of \(length) bytes") }
        let body = try file.readHeaderField(length)
        let digest = try file.readHeaderField(ArchiveFormat.digestByteCount)
        let expected = KeyedHash.digest(of: magic + fixed + body, key: ArchiveFormat.headerDigestKey)
        guard constantTimeEqual(digest, expected) else { throw ArchiveError.corruptHeader("its digest does not match") }
        do {
            header = try JSONDecoder().decode(ArchiveHeader.self, from: Data(body))
        } catch {
            throw ArchiveError.corruptHeader("its fields do not parse")
        }
        headerDigest = digest
        sectionsOffset = file.offset
        fileBytes = try file.size()
    }

    /// Reads every section in order, authenticated, handing each content to `body`, and returns
    /// the manifest. Encrypted archives need the password.
    @discardableResult
    public func read(password: Data?, _ section: (SectionKind, Data) throws -> Void = { _, _ in }) throws -> ArchiveManifest {
        try read(keys: try sectionKeys(password: password), section)
    }

    /// `read` with the keys already derived (restore needs them for the items too).
    func read(keys: SectionKeys, _ section: (SectionKind, Data) throws -> Void) throws -> ArchiveManifest {
        let file = try ArchiveFile(url)
        defer { file.close() }
        try file.seek(to: sectionsOffset)
        let limit = ArchiveFormat.maximumContentBytes(fileBytes: fileBytes)
        var index = 0, total: UInt64 = 0
        while true {
            let (kind, sealed) = try readSection(file, expectedIndex: index)
            let content = try open(kind, index: index, body: sealed, keys: keys)
            total += UInt64(content.count)
            guard total <= limit else {
                throw ArchiveError.inconsistent("its sections hold more than \(limit >> 20) MiB once decompressed, over 4,096 times the file's size: "
                                                + "crafted to exhaust its reader, or a file of little but zeros")
            }
            if kind == .manifest {
                let manifest = try decodeManifest(content, index: index)
                guard manifest.sectionCount == index else {
                    throw ArchiveError.inconsistent("the manifest counts \(manifest.sectionCount) sections, the archive has \(index)")
                }
                guard try file.isAtEnd() else { throw ArchiveError.inconsistent("bytes follow the manifest") }
                return manifest
            }
            try section(kind, content)
            index += 1
        }
    }

    /// The manifest, read without the password: sections are skipped, not opened. For an
    /// unencrypted archive it is authenticated like every section; for an encrypted one its
    /// digest needs the password, so it is as recorded.
    public func unverifiedManifest() throws -> ArchiveManifest {
        let file = try ArchiveFile(url)
        defer { file.close() }
        try file.seek(to: sectionsOffset)
        var index = 0
        while true {
            let (kind, length) = try readFrame(file, expectedIndex: index)
            if kind == .manifest {
                let body = try file.readSectionBody(Int(length), after: index)
                let content = header.mode == .unencrypted
                    ? try open(kind, index: index, body: body, keys: SectionKeys(headerDigest: headerDigest))
                    : try decompress(Data(body.dropLast(ArchiveFormat.digestByteCount)), kind: kind, index: index)
                return try decodeManifest(content, index: index)
            }
            try file.skip(length, after: index)
            index += 1
        }
    }

    /// The keys the password (or, unencrypted, the header) leads to.
    func sectionKeys(password: Data?) throws -> SectionKeys {
        guard header.mode == .encrypted else { return SectionKeys(headerDigest: headerDigest) }
        guard let password else { throw ArchiveError.passwordRequired }
        guard let hashing = header.passwordHashing, let sealedKey = header.sealedKey else {
            throw ArchiveError.corruptHeader("an encrypted archive without its sealed key")
        }
        // The header is read before anything authenticates it: a forged cost must not buy hours
        // of CPU or gigabytes of memory. libsodium's "sensitive" level is the most a writer uses.
        guard (1...10).contains(hashing.parameters.operations),
              (8 << 10...1 << 30).contains(hashing.parameters.memoryBytes) else {
            throw ArchiveError.corruptHeader("its password hashing asks for \(hashing.parameters.operations) passes over \(hashing.parameters.memoryBytes) bytes, outside what an archive uses (1 to 10 passes, 8 KiB to 1 GiB)")
        }
        let passwordKey: SymmetricKey
        do {
            passwordKey = try PasswordHash.argon2id(password: password, salt: Array(hashing.salt), parameters: hashing.parameters)
        } catch {
            throw ArchiveError.corruptHeader("its password hashing parameters are unusable")
        }
        do {
            return SectionKeys(archiveKey: try AEAD.unwrap(sealedKey, under: passwordKey, associatedData: header.archiveID))
        } catch {
            throw ArchiveError.wrongPassword
        }
    }

    private func readFrame(_ file: ArchiveFile, expectedIndex: Int) throws -> (SectionKind, UInt64) {
        let frame = try file.readSectionBody(ArchiveFormat.sectionFrameByteCount, after: expectedIndex)
        let index = Int(UInt32(bigEndianBytes: frame[1..<5]))
        guard index == expectedIndex else { throw ArchiveError.misplacedSection(expected: expectedIndex, found: index) }
        guard let kind = SectionKind(rawValue: frame[0]) else { throw ArchiveError.corruptSection(index: index, kind: "unknown kind \(frame[0])") }
        let length = UInt64(bigEndianBytes: frame[5..<13])
        guard length <= UInt64(ArchiveFormat.maximumSectionBytes) * 2 + 1024 else {
            throw ArchiveError.corruptSection(index: index, kind: kind.description)
        }
        return (kind, length)
    }

    private func readSection(_ file: ArchiveFile, expectedIndex: Int) throws -> (SectionKind, Data) {
        let (kind, length) = try readFrame(file, expectedIndex: expectedIndex)
        return (kind, try file.readSectionBody(Int(length), after: expectedIndex))
    }

    private func open(_ kind: SectionKind, index: Int, body: Data, keys: SectionKeys) throws -> Data {
        let associatedData = SectionKeys.associatedData(headerDigest: headerDigest, kind: kind, index: UInt32(index))
        let compressed: Data
        if let sealing = keys.sealing, kind != .manifest {
            do {
                compressed = try AEAD.open(body, key: sealing, associatedData: associatedData)
            } catch {
                throw ArchiveError.corruptSection(index: index, kind: kind.description)
            }
        } else {
            guard body.count >= ArchiveFormat.digestByteCount else { throw ArchiveError.corruptSection(index: index, kind: kind.description) }
            compressed = Data(body.dropLast(ArchiveFormat.digestByteCount))
            let expected = KeyedHash.digest(of: associatedData + compressed, key: keys.digest)
            guard constantTimeEqual(body.suffix(ArchiveFormat.digestByteCount), expected) else {
                throw ArchiveError.corruptSection(index: index, kind: kind.description)
            }
        }
        return try decompress(compressed, kind: kind, index: index)
    }

    private func decompress(_ compressed: Data, kind: SectionKind, index: Int) throws -> Data {
        do {
            return try Zstd.decompress(compressed, limit: ArchiveFormat.maximumSectionBytes)
        } catch {
            throw ArchiveError.corruptSection(index: index, kind: kind.description)
        }
    }

    private func decodeManifest(_ content: Data, index: Int) throws -> ArchiveManifest {
        do {
            return try JSONDecoder().decode(ArchiveManifest.self, from: content)
        } catch {
            throw ArchiveError.corruptSection(index: index, kind: SectionKind.manifest.description)
        }
    }
}

/// Exact reads from the archive file, turning a short read into the right error.
private final class ArchiveFile {
    private let handle: FileHandle
    private(set) var offset: UInt64 = 0

    init(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw ArchiveError.unreadable("there is no file \(url.path)")
        }
        guard !isDirectory.boolValue else { throw ArchiveError.unreadable("\(url.path) is a directory") }
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw ArchiveError.unreadable("\(url.path): \(error.localizedDescription)")
        }
    }

    func close() { try? handle.close() }

    /// Up to `count` bytes; fewer only at the end of the file.
    func read(_ count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        let data = try handle.read(upToCount: count) ?? Data()
        offset += UInt64(data.count)
        return Array(data)
    }

    func readHeaderField(_ count: Int) throws -> [UInt8] {
        let bytes = try read(count)
        guard bytes.count == count else { throw ArchiveError.corruptHeader("the file ends inside it") }
        return bytes
    }

    func readSectionBody(_ count: Int, after sections: Int) throws -> Data {
        let bytes = try read(count)
        guard bytes.count == count else { throw ArchiveError.truncated(afterSections: sections) }
        return Data(bytes)
    }

    func seek(to position: UInt64) throws {
        try handle.seek(toOffset: position)
        offset = position
    }

    func skip(_ count: UInt64, after sections: Int) throws {
        let end = try handle.seekToEnd()
        guard offset + count <= end else { throw ArchiveError.truncated(afterSections: sections) }
        try seek(to: offset + count)
    }

    func size() throws -> UInt64 {
        let end = try handle.seekToEnd()
        try handle.seek(toOffset: offset)
        return end
    }

    func isAtEnd() throws -> Bool {
        try handle.read(upToCount: 1)?.isEmpty ?? true
    }
}
