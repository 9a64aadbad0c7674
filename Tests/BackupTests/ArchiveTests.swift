import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Testing

@testable import Backup

@Suite("Backup archive container")
struct ArchiveTests {
    let device = UUID(uuidString: "6B1C9F5E-0000-4000-8000-000000000001")!
    /// The writing device's keys: its hardware UID is 32 bytes of 0x07.
    var keys: DeviceBackupKeys { DeviceBackupKeys(deviceID: device, hardwareUID: try! SymmetricKey(bytes: Array(repeating: 7, count: 32))) }
    let password = Data("correct horse".utf8)

    func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID().uuidString).kfbackup")
    }

    /// Three sections and a manifest, in either mode.
    func write(_ mode: ArchiveWriter.Mode, to url: URL, entropy: any EntropySource = SystemEntropy()) throws {
        let writer = try ArchiveWriter(
            to: url, mode: mode, device: keys, deviceName: "Test iPhone",
            created: Date(timeIntervalSinceReferenceDate: 800_000_000), entropy: entropy)
        try writer.append(.apps, Data(#"[{"bundleID":"com.example.mail"}]"#.utf8))
        try writer.append(.keychain, Data(repeating: 0x41, count: 10_000))
        try writer.append(.sandbox, Data("signedInUser=alice@example.com".utf8))
        try writer.finish(ArchiveManifest(counts: ["apps": 1, "items": 1], warnings: ["a plaintext secret"]))
    }

    var encrypted: ArchiveWriter.Mode { .encrypted(password: password, parameters: .minimum) }

    @Test("round trip in both modes: every section back, in order, with the manifest", arguments: [true, false])
    func roundTrip(encrypted isEncrypted: Bool) throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(isEncrypted ? encrypted : .unencrypted, to: url)
        let reader = try ArchiveReader(contentsOf: url)
        #expect(reader.header.mode == (isEncrypted ? .encrypted : .unencrypted))
        #expect(reader.header.deviceName == "Test iPhone")
        var sections: [(SectionKind, Data)] = []
        let manifest = try reader.read(password: isEncrypted ? password : nil) { sections.append(($0, $1)) }
        #expect(sections.map(\.0) == [.apps, .keychain, .sandbox])
        #expect(sections[1].1 == Data(repeating: 0x41, count: 10_000))
        #expect(manifest.sectionCount == 3)
        #expect(manifest.counts["items"] == 1)
        #expect(try reader.unverifiedManifest() == manifest)
        // The plaintext of a sealed section is nowhere in an encrypted file; in plain it is compressed, not hidden.
        let bytes = try Data(contentsOf: url)
        #expect((bytes.range(of: Data("alice@example.com".utf8)) != nil) == !isEncrypted)
    }

    @Test("no partial file is left when a writer is abandoned, and nothing appears under the name")
    func abandoned() throws {
        let url = temporaryFile()
        do {
            let writer = try ArchiveWriter(to: url, mode: .unencrypted, device: keys, deviceName: "x")
            try writer.append(.apps, Data("[]".utf8))
        }
        let siblings = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
        #expect(!siblings.contains { $0.contains(url.lastPathComponent) })
    }

    @Test("an archive never replaces what is at its path: refused at the start, and when something appears there while it is written")
    func neverReplaces() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
        try Data("keep".utf8).write(to: url.appendingPathComponent("inside"))
        #expect {
            _ = try ArchiveWriter(to: url, mode: .unencrypted, device: keys, deviceName: "x")
        } throws: { error in
            guard case .exists? = error as? ArchiveError else { return false }
            return true
        }
        try FileManager.default.removeItem(at: url)

        let writer = try ArchiveWriter(to: url, mode: .unencrypted, device: keys, deviceName: "x")
        try writer.append(.apps, Data("[]".utf8))
        try Data("appeared".utf8).write(to: url)
        #expect {
            try writer.finish(ArchiveManifest())
        } throws: { error in
            guard case .cannotWrite(let why)? = error as? ArchiveError else { return false }
            return why.contains("appeared while the backup was written")
        }
        #expect(try Data(contentsOf: url) == Data("appeared".utf8))
        let beside = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
        #expect(!beside.contains { $0.hasPrefix(".\(url.lastPathComponent).partial-") }, "no partial file is left")
    }

    @Test("a wrong or missing password is named as such")
    func passwords() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(encrypted, to: url)
        let reader = try ArchiveReader(contentsOf: url)
        #expect(throws: ArchiveError.wrongPassword) { try reader.read(password: Data("wrong".utf8)) }
        #expect(throws: ArchiveError.passwordRequired) { try reader.read(password: nil) }
    }

    /// Where each part of a written archive starts: header end, then each section's frame.
    func layout(_ bytes: Data) -> (headerEnd: Int, sections: [Int]) {
        func number(_ range: Range<Int>) -> Int { bytes[range].reduce(0) { $0 << 8 | Int($1) } }
        let headerLength = number(10..<14)
        let headerEnd = 14 + headerLength + 32
        var starts: [Int] = []
        var offset = headerEnd
        while offset < bytes.count {
            starts.append(offset)
            let length = number((offset + 5)..<(offset + 13))
            offset += 13 + length
        }
        return (headerEnd, starts)
    }

    @Test("truncation anywhere is named truncated", arguments: [true, false])
    func truncation(encrypted isEncrypted: Bool) throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(isEncrypted ? encrypted : .unencrypted, to: url)
        let bytes = try Data(contentsOf: url)
        let parts = layout(bytes)
        #expect(parts.sections.count == 4)
        for cut in parts.sections + parts.sections.map({ $0 + 20 }) + [bytes.count - 1] {
            try bytes.prefix(cut).write(to: url)
            let error = #expect(throws: ArchiveError.self) { try ArchiveReader(contentsOf: url).read(password: password) }
            guard case .truncated = error else {
                Issue.record("cut at \(cut): \(String(describing: error))")
                continue
            }
        }
    }

    @Test("a flipped byte in the header, in each section's body, or after the end has its own error", arguments: [true, false])
    func flippedBytes(encrypted isEncrypted: Bool) throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(isEncrypted ? encrypted : .unencrypted, to: url)
        let original = try Data(contentsOf: url)
        let parts = layout(original)
        func flipped(at offset: Int) -> Data {
            var bytes = original
            bytes[offset] ^= 0x01
            return bytes
        }
        try flipped(at: 20).write(to: url)
        #expect(throws: ArchiveError.self) { _ = try ArchiveReader(contentsOf: url) }
        for (index, start) in parts.sections.enumerated() {
            try flipped(at: start + 13 + 2).write(to: url)
            let error = #expect(throws: ArchiveError.self) { try ArchiveReader(contentsOf: url).read(password: password) }
            guard case .corruptSection(let found, _) = error, found == index else {
                Issue.record("section \(index): \(String(describing: error))")
                continue
            }
        }
        try (original + Data([0])).write(to: url)
        #expect(throws: ArchiveError.inconsistent("bytes follow the manifest")) { try ArchiveReader(contentsOf: url).read(password: password) }
    }

    @Test("swapped sections and a section from another archive are refused", arguments: [true, false])
    func swapped(encrypted isEncrypted: Bool) throws {
        let url = temporaryFile()
        let other = temporaryFile()
        defer {
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: other)
        }
        let mode = isEncrypted ? encrypted : .unencrypted
        try write(mode, to: url)
        try write(mode, to: other)
        let bytes = try Data(contentsOf: url)
        let s = layout(bytes).sections
        // Sections 1 and 2 exchanged, index fields and all.
        let swapped = bytes[..<s[1]] + bytes[s[2]..<s[3]] + bytes[s[1]..<s[2]] + bytes[s[3]...]
        try Data(swapped).write(to: url)
        #expect(throws: ArchiveError.misplacedSection(expected: 1, found: 2)) { try ArchiveReader(contentsOf: url).read(password: password) }
        // Section 1 of another archive of the same device, in the same place.
        let foreign = try Data(contentsOf: other)
        let f = layout(foreign).sections
        try Data(bytes[..<s[1]] + foreign[f[1]..<f[2]] + bytes[s[2]...]).write(to: url)
        let error = #expect(throws: ArchiveError.self) { try ArchiveReader(contentsOf: url).read(password: password) }
        #expect(error == .corruptSection(index: 1, kind: "keychain"))
    }

    @Test("a newer format and a file that is not an archive are named")
    func versions() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(.unencrypted, to: url)
        var bytes = try Data(contentsOf: url)
        bytes[9] = 4
        try bytes.write(to: url)
        #expect(throws: ArchiveError.newerFormat(found: 4, supported: 3)) { _ = try ArchiveReader(contentsOf: url) }
        try Data("PK\u{3}\u{4} a zip file".utf8).write(to: url)
        #expect(throws: ArchiveError.notAnArchive) { _ = try ArchiveReader(contentsOf: url) }
    }

    @Test("unencrypted: authenticated only with the keys of the device that wrote it; a forger's archive passes its checksums and fails there")
    func unencryptedBoundToItsDevice() throws {
        let url = temporaryFile()
        let forged = temporaryFile()
        defer {
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: forged)
        }
        try write(.unencrypted, to: url)
        let reader = try ArchiveReader(contentsOf: url)
        let stranger = DeviceBackupKeys(deviceID: UUID(), hardwareUID: SymmetricKey())
        #expect(reader.authenticity(device: keys) == .device)
        #expect(reader.authenticity(device: nil) == .checksums)
        #expect(reader.authenticity(device: stranger) == .checksums)
        #expect(try reader.read(password: nil, device: keys).sectionCount == 3)

        // The same device ID under another hardware UID: all a forger can do.
        let forger = DeviceBackupKeys(deviceID: device, hardwareUID: SymmetricKey())
        let writer = try ArchiveWriter(to: forged, mode: .unencrypted, device: forger, deviceName: "Test iPhone")
        try writer.append(.apps, Data(#"[{"bundleID":"com.example.evil"}]"#.utf8))
        try writer.finish(ArchiveManifest())
        let forgery = try ArchiveReader(contentsOf: forged)
        #expect(try forgery.read(password: nil).sectionCount == 1, "its checksums pass: they detect damage only")
        #expect(throws: ArchiveError.corruptSection(index: 0, kind: "apps")) { try forgery.read(password: nil, device: keys) }

        // The sandbox section of the genuine archive replaced, its checksum recomputed from the
        // header (public), its device digest kept: intact to anyone, corrupt to its device.
        let bytes = try Data(contentsOf: url)
        let parts = layout(bytes)
        let headerDigest = Array(bytes[(parts.headerEnd - 32)..<parts.headerEnd])
        let compressed = try CompressedSection(.sandbox, Data("signedInUser=mallory@example.com".utf8)).compressed
        let associatedData = SectionKeys.associatedData(headerDigest: headerDigest, kind: .sandbox, index: 2)
        let checksum = KeyedHash.digest(of: associatedData + compressed, key: try SymmetricKey(bytes: headerDigest))
        let body = compressed + checksum + bytes[(parts.sections[3] - 32)..<parts.sections[3]]
        let frame = [SectionKind.sandbox.rawValue] + UInt32(2).bigEndianBytes + UInt64(body.count).bigEndianBytes
        try Data(bytes[..<parts.sections[2]] + frame + body + bytes[parts.sections[3]...]).write(to: url)
        var sandbox = Data()
        try ArchiveReader(contentsOf: url).read(password: nil) { kind, content in if kind == .sandbox { sandbox = content } }
        #expect(String(decoding: sandbox, as: UTF8.self).contains("mallory"), "the forgery passes its checksums")
        #expect(throws: ArchiveError.corruptSection(index: 2, kind: "sandbox")) { try ArchiveReader(contentsOf: url).read(password: nil, device: keys) }
    }

    @Test("format 1 archives still read: encrypted ones under their password; unencrypted ones are checksummed only, even on their device")
    func formatOne() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Format1")
        let sealed = try ArchiveReader(contentsOf: directory.appendingPathComponent("v1-encrypted.kfbackup"))
        #expect(sealed.version == 1)
        var kinds: [SectionKind] = []
        let manifest = try sealed.read(password: password) { kind, _ in kinds.append(kind) }
        #expect(kinds == [.apps, .keychain, .sandbox])
        #expect(manifest.counts["items"] == 1)
        #expect(throws: ArchiveError.wrongPassword) { try sealed.read(password: Data("wrong".utf8)) }

        let plain = try ArchiveReader(contentsOf: directory.appendingPathComponent("v1-unencrypted.kfbackup"))
        #expect(plain.version == 1)
        #expect(plain.header.deviceID == device)
        #expect(plain.authenticity(device: keys) == .checksums)
        #expect(try plain.read(password: nil, device: keys).sectionCount == 3)
        #expect(try plain.sectionKeys(password: nil, device: keys).items.archiveID == nil, "its items are bound to no archive")
    }

    @Test("the test vectors of Protocol/backup.md: the same seed writes the same bytes", arguments: ArchiveVector.both)
    func vector(_ vector: ArchiveVector) throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(vector.encrypted ? encrypted : .unencrypted, to: url, entropy: SeededEntropy(seed: 2026))
        let bytes = try Data(contentsOf: url)
        let digest = KeyedHash.digest(of: bytes, key: try SymmetricKey(bytes: [UInt8](repeating: 0, count: 32)))
        #expect(bytes.count == vector.byteCount)
        // The header digest, reproduced independently (Python's hashlib.blake2b).
        let headerEnd = 14 + Int(bytes[10..<14].reduce(0) { $0 << 8 | UInt32($1) })
        #expect(bytes[headerEnd..<(headerEnd + 32)].map { String(format: "%02x", $0) }.joined() == vector.headerDigest)
        #expect(digest.map { String(format: "%02x", $0) }.joined() == vector.digest)
    }
}

/// The archives of `ArchiveTests.write(_, seed 2026)`, as published in Protocol/backup.md.
struct ArchiveVector: Sendable, CustomTestStringConvertible {
    var encrypted: Bool
    var byteCount: Int
    /// Keyed BLAKE2b-256 of the whole file under 32 zero bytes.
    var digest: String
    var headerDigest: String

    var testDescription: String { encrypted ? "encrypted" : "unencrypted" }

    static let both = [
        ArchiveVector(
            encrypted: true, byteCount: 830,
            digest: "a1f8577ed4a9c12e4c23993c60347ad2c33b0e90b6c2d029d20bbf122cd5c923",
            headerDigest: "3f02547f2e3c8c4eb837a31de1b6c7bd2b7635f9766fcf796fd6f9f8a9efcbf5"),
        ArchiveVector(
            encrypted: false, byteCount: 697,
            digest: "fd9a30d4c2781dc9a1915c9715fedc0adffa28c3457c27b7f6f70132a03a092d",
            headerDigest: "dc2e41b6488ce1f98078aef23c14d14165a62e45d465f40f8b19e94231f9684c"),
    ]
}
