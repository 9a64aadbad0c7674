package import Foundation
package import KeychainModel
package import KeychainStore
import KeyferryCompression
import KeyferryCrypto

/// Reads an archive front to back, one section in memory at a time, authenticating each before
/// handing it out. Every kind of damage is its own `ArchiveError`.
package struct ArchiveReader: Sendable {
    package let header: ArchiveHeader
    /// The format it was written in (`ArchiveFormat.oldestReadableVersion` or later).
    package let version: UInt16
    private let headerDigest: [UInt8]
    /// Where the first section starts.
    private let sectionsOffset: UInt64
    /// The file's size, which bounds what its sections may hold decompressed.
    private let fileBytes: UInt64
    private let source: ArchiveSource

    /// Reads and checks the header; sections are read by `read` or `unverifiedManifest`.
    package init(contentsOf url: URL) throws {
        try self.init(.file(url))
    }

    /// An archive held in memory, with every check a file gets: for readers of millions of
    /// inputs (the fuzzer), which a file each would slow a hundredfold.
    package init(bytes: Data) throws {
        try self.init(.bytes(bytes))
    }

    private init(_ source: ArchiveSource) throws {
        self.source = source
        let file = try ArchiveFile(source)
        defer { file.close() }
        guard let magic = try? file.read(ArchiveFormat.magic.count), magic == ArchiveFormat.magic else { throw ArchiveError.notAnArchive }
        let fixed = try file.readHeaderField(6)
        let version = UInt16(bigEndianBytes: fixed.prefix(2))
        guard version <= ArchiveFormat.version else { throw ArchiveError.newerFormat(found: version, supported: ArchiveFormat.version) }
        guard version >= ArchiveFormat.oldestReadableVersion else { throw ArchiveError.corruptHeader("format version \(version)") }
        self.version = version
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

    /// Reads every section in order, checked, handing each content to `body`, and returns the
    /// manifest. Encrypted archives need the password. An unencrypted archive is authenticated
    /// when `device` is the device that wrote it, and checked for damage only otherwise
    /// (`authenticity(device:)` says which).
    @discardableResult
    package func read(
        password: Data?, device: DeviceBackupKeys? = nil,
        _ section: (SectionKind, Data) throws -> Void = { _, _ in }
    ) throws -> ArchiveManifest {
        try read(keys: try sectionKeys(password: password, device: device), section)
    }

    /// What reading this archive with `device`'s keys proves about it.
    package func authenticity(device: DeviceBackupKeys?) -> ArchiveAuthenticity {
        if header.mode == .encrypted { return .password }
        return deviceSectionKey(device) == nil ? .checksums : .device
    }

    /// The key of the device digests, when `device` wrote this (format 2, unencrypted) archive.
    private func deviceSectionKey(_ device: DeviceBackupKeys?) -> SymmetricKey? {
        guard version >= 2, let device, device.deviceID == header.deviceID else { return nil }
        return device.sections
    }

    /// `read` with the keys already derived (restore needs them for the items too).
    func read(keys: SectionKeys, _ section: (SectionKind, Data) throws -> Void) throws -> ArchiveManifest {
        let file = try ArchiveFile(source)
        defer { file.close() }
        try file.seek(to: sectionsOffset)
        let limit = ArchiveFormat.maximumContentBytes(fileBytes: fileBytes)
        var index = 0
        var total: UInt64 = 0
        while true {
            let (kind, sealed) = try readSection(file, expectedIndex: index)
            let content = try open(kind, index: index, body: sealed, keys: keys)
            total += UInt64(content.count)
            guard total <= limit else {
                throw ArchiveError.inconsistent(
                    "its sections hold more than \(limit >> 20) MiB once decompressed, over 4,096 times the file's size: "
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
    /// unencrypted archive its checksum is checked (damage, not forgery); for an encrypted one
    /// its digest needs the password, so it is as recorded.
    package func unverifiedManifest() throws -> ArchiveManifest {
        let file = try ArchiveFile(source)
        defer { file.close() }
        try file.seek(to: sectionsOffset)
        var index = 0
        while true {
            let (kind, length) = try readFrame(file, expectedIndex: index)
            if kind == .manifest {
                let body = try file.readSectionBody(Int(length), after: index)
                let content =
                    header.mode == .unencrypted
                    ? try open(kind, index: index, body: body, keys: try sectionKeys(password: nil, device: nil))
                    : try decompress(Data(body.dropLast(ArchiveFormat.digestByteCount)), kind: kind, index: index)
                return try decodeManifest(content, index: index)
            }
            try file.skip(length, after: index)
            index += 1
        }
    }

    /// The keys the password (or, unencrypted, the header and the device) leads to.
    func sectionKeys(password: Data?, device: DeviceBackupKeys?) throws -> SectionKeys {
        let items = ItemBinding(header, version: version)
        guard header.mode == .encrypted else {
            return SectionKeys(headerDigest: headerDigest, device: deviceSectionKey(device), items: items)
        }
        guard let password else { throw ArchiveError.passwordRequired }
        guard let hashing = header.passwordHashing, let sealedKey = header.sealedKey else {
            throw ArchiveError.corruptHeader("an encrypted archive without its sealed key")
        }
        guard hashing.algorithm == ArchiveHeader.PasswordHashing.argon2id else {
            throw ArchiveError.corruptHeader("its password hashing is \(hashing.algorithm), not the \(ArchiveHeader.PasswordHashing.argon2id) Keyferry writes")
        }
        // The header is read before anything authenticates it: a forged cost must not buy hours
        // of CPU or gigabytes of memory. libsodium's "sensitive" level is the most a writer uses.
        guard (1...10).contains(hashing.parameters.operations),
            (8 << 10...1 << 30).contains(hashing.parameters.memoryBytes)
        else {
            throw ArchiveError.corruptHeader(
                "its password hashing asks for \(hashing.parameters.operations) passes over \(hashing.parameters.memoryBytes) bytes, outside what an archive uses (1 to 10 passes, 8 KiB to 1 GiB)"
            )
        }
        let passwordKey: SymmetricKey
        do {
            passwordKey = try PasswordHash.argon2id(password: password, salt: Array(hashing.salt), parameters: hashing.parameters)
        } catch {
            throw ArchiveError.corruptHeader("its password hashing parameters are unusable")
        }
        do {
            return SectionKeys(archiveKey: try AEAD.unwrap(sealedKey, under: passwordKey, associatedData: header.archiveID), items: items)
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
            // Unencrypted from format 2: a checksum, then the device's digest.
            let digests = keys.sealing == nil && version >= 2 ? 2 : 1
            let trailer = ArchiveFormat.digestByteCount * digests
            guard body.count >= trailer else { throw ArchiveError.corruptSection(index: index, kind: kind.description) }
            compressed = Data(body.dropLast(trailer))
            let signed = associatedData + compressed
            let checksum = body.dropLast(trailer - ArchiveFormat.digestByteCount).suffix(ArchiveFormat.digestByteCount)
            guard constantTimeEqual(checksum, KeyedHash.digest(of: signed, key: keys.digest)) else {
                throw ArchiveError.corruptSection(index: index, kind: kind.description)
            }
            if let device = keys.device,
                !constantTimeEqual(body.suffix(ArchiveFormat.digestByteCount), KeyedHash.digest(of: signed, key: device))
            {
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

/// Where an archive's bytes are.
private enum ArchiveSource {
    case file(URL)
    case bytes(Data)
}

/// Exact reads from the archive, turning a short read into the right error.
private final class ArchiveFile {
    private enum Storage {
        case handle(FileHandle)
        case bytes(Data)
    }

    private let storage: Storage
    private(set) var offset: UInt64 = 0

    init(_ source: ArchiveSource) throws {
        switch source {
        case .bytes(let bytes):
            storage = .bytes(bytes)
        case .file(let url):
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                throw ArchiveError.noSuchFile(url.path)
            }
            guard !isDirectory.boolValue else { throw ArchiveError.unreadable("\(url.path) is a directory") }
            do {
                storage = .handle(try FileHandle(forReadingFrom: url))
            } catch {
                throw ArchiveError.unreadable("\(url.path): \(error.localizedDescription)")
            }
        }
    }

    func close() {
        if case .handle(let handle) = storage { try? handle.close() }
    }

    /// Up to `count` bytes; fewer only at the end of the file.
    func read(_ count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        let data: [UInt8]
        switch storage {
        case .handle(let handle):
            data = Array(try handle.read(upToCount: count) ?? Data())
        case .bytes(let bytes):
            let start = bytes.startIndex + Int(min(offset, UInt64(bytes.count)))
            data = Array(bytes[start..<(start + min(count, bytes.endIndex - start))])
        }
        offset += UInt64(data.count)
        return data
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
        if case .handle(let handle) = storage { try handle.seek(toOffset: position) }
        offset = position
    }

    func skip(_ count: UInt64, after sections: Int) throws {
        guard offset + count <= (try size()) else { throw ArchiveError.truncated(afterSections: sections) }
        try seek(to: offset + count)
    }

    func size() throws -> UInt64 {
        switch storage {
        case .bytes(let bytes):
            return UInt64(bytes.count)
        case .handle(let handle):
            let end = try handle.seekToEnd()
            try handle.seek(toOffset: offset)
            return end
        }
    }

    func isAtEnd() throws -> Bool { try read(1).isEmpty }
}
