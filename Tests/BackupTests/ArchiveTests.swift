import Backup
import Foundation
import KeyferryCrypto
import Testing

@Suite("Backup archive container")
struct ArchiveTests {
    let device = UUID(uuidString: "6B1C9F5E-0000-4000-8000-000000000001")!
    let password = Data("correct horse".utf8)

    func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID().uuidString).kfbackup")
    }

    /// Three sections and a manifest, in either mode.
    func write(_ mode: ArchiveWriter.Mode, to url: URL, entropy: any EntropySource = SystemEntropy()) throws {
        let writer = try ArchiveWriter(to: url, mode: mode, deviceID: device, deviceName: "Test iPhone",
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
            let writer = try ArchiveWriter(to: url, mode: .unencrypted, deviceID: device, deviceName: "x")
            try writer.append(.apps, Data("[]".utf8))
        }
        let siblings = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
        #expect(!siblings.contains { $0.contains(url.lastPathComponent) })
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
            guard case .truncated = error else { Issue.record("cut at \(cut): \(String(describing: error))"); continue }
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
                Issue.record("section \(index): \(String(describing: error))"); continue
            }
        }
        try (original + Data([0])).write(to: url)
        #expect(throws: ArchiveError.inconsistent("bytes follow the manifest")) { try ArchiveReader(contentsOf: url).read(password: password) }
    }

    @Test("swapped sections and a section from another archive are refused", arguments: [true, false])
    func swapped(encrypted isEncrypted: Bool) throws {
        let url = temporaryFile(), other = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url); try? FileManager.default.removeItem(at: other) }
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
        bytes[9] = 2
        try bytes.write(to: url)
        #expect(throws: ArchiveError.newerFormat(found: 2, supported: 1)) { _ = try ArchiveReader(contentsOf: url) }
        try Data("PK\u{3}\u{4} a zip file".utf8).write(to: url)
        #expect(throws: ArchiveError.notAnArchive) { _ = try ArchiveReader(contentsOf: url) }
    }

    @Test("the test vector of Protocol/backup.md: the same seed writes the same bytes")
    func vector() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url) }
        try write(encrypted, to: url, entropy: SeededEntropy(seed: 2026))
        let bytes = try Data(contentsOf: url)
        let digest = KeyedHash.digest(of: bytes, key: try SymmetricKey(bytes: [UInt8](repeating: 0, count: 32)))
        #expect(bytes.count == ArchiveVector.byteCount)
        // The header digest, reproduced independently (Python's hashlib.blake2b).
        let headerEnd = 14 + Int(bytes[10..<14].reduce(0) { $0 << 8 | UInt32($1) })
        #expect(bytes[headerEnd..<(headerEnd + 32)].map { String(format: "%02x", $0) }.joined() == ArchiveVector.headerDigest)
        #expect(digest.map { String(format: "%02x", $0) }.joined() == ArchiveVector.digest)
    }
}

/// The archive of `ArchiveTests.write(encrypted, seed 2026)`, as published in Protocol/backup.md.
enum ArchiveVector {
    static let byteCount = 830
    /// Keyed BLAKE2b-256 of the whole file under 32 zero bytes.
    static let digest = "4c9cd7aeea89cbdce253a02f2990d3e024e12482443c5d4291c6c0f7be70528a"
    static let headerDigest = "921844933f75ac3abf5e7dbb6d905810a4cb8dab735e2f0b104c54ce08167724"
}
