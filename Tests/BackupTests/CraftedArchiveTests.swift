import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Testing

@testable import Backup

/// Values read from an archive before anything authenticates them: each bad one is an error
/// naming it, never a trap or hours of work.
@Suite("Crafted archive fields")
struct CraftedArchiveTests {
    let password = Data("correct horse".utf8)

    @Test("a password hashing cost outside what archives use is refused before any hashing")
    func hashingCostBounded() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID().uuidString).kfbackup")
        defer { try? FileManager.default.removeItem(at: url) }
        let costly = PasswordHashParameters(operations: 11, memoryBytes: 8 << 10)
        let writer = try ArchiveWriter(
            to: url, mode: .encrypted(password: password, parameters: costly), device: DeviceBackupKeys(deviceID: UUID(), hardwareUID: SymmetricKey()),
            deviceName: "Test iPhone")
        try writer.append(.apps, Data("[]".utf8))
        try writer.finish(ArchiveManifest())
        let reader = try ArchiveReader(contentsOf: url)
        #expect {
            _ = try reader.sectionKeys(password: password, device: nil)
        } throws: { error in
            guard case .corruptHeader(let why)? = error as? ArchiveError else { return false }
            return why.contains("11 passes")
        }
    }

    @Test("a password hashing algorithm other than Argon2id is refused by name, before any hashing")
    func hashingAlgorithmChecked() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID().uuidString).kfbackup")
        defer { try? FileManager.default.removeItem(at: url) }
        let writer = try ArchiveWriter(
            to: url, mode: .encrypted(password: password, parameters: .minimum),
            device: DeviceBackupKeys(deviceID: UUID(), hardwareUID: SymmetricKey()), deviceName: "Test iPhone")
        try writer.finish(ArchiveManifest())
        // The header edited in place (same length) and its public digest recomputed.
        var bytes = try Data(contentsOf: url)
        let range = try #require(bytes.range(of: Data("argon2id13".utf8)))
        bytes.replaceSubrange(range, with: Data("scrypt0013".utf8))
        let headerEnd = 14 + Int(UInt32(bigEndianBytes: bytes[10..<14]))
        bytes.replaceSubrange(headerEnd..<(headerEnd + 32), with: KeyedHash.digest(of: bytes[..<headerEnd], key: ArchiveFormat.headerDigestKey))
        try bytes.write(to: url)
        #expect {
            _ = try ArchiveReader(contentsOf: url).sectionKeys(password: password, device: nil)
        } throws: { error in
            guard case .corruptHeader(let why)? = error as? ArchiveError else { return false }
            return why.contains("scrypt0013")
        }
    }

    @Test("Argon2id with a memory cost past what an Int holds throws instead of trapping")
    func hashingMemoryPastInt() {
        #expect(throws: CryptoError.self) {
            try PasswordHash.argon2id(
                password: Data("p".utf8), salt: Array(repeating: 0, count: PasswordHashParameters.saltByteCount),
                parameters: PasswordHashParameters(operations: 1, memoryBytes: .max))
        }
    }

    @Test("a sandbox piece at an offset past any file is malformed", arguments: [UInt64.max, UInt64(1) << 63, UInt64(1) << 40 + 1])
    func sandboxOffsetBounded(offset: UInt64) throws {
        var w = ByteWriter()
        w.string("com.example.mail")
        w.string("Documents/a")
        w.string("ck")
        w.uint64(offset)
        w.lengthPrefixed([UInt8]())
        #expect(throws: ByteReader.Malformed.self) { try SandboxEntry(decoding: w.bytes[...]) }

        var fine = ByteWriter()
        fine.string("com.example.mail")
        fine.string("Documents/a")
        fine.string("ck")
        fine.uint64(1 << 40)
        fine.lengthPrefixed([UInt8]())
        #expect(try SandboxEntry(decoding: fine.bytes[...]).offset == 1 << 40)
    }

    @Test("the backup keybag has no key for ThisDeviceOnly classes: such an item is reported, not trapped on")
    func noBackupKeyForDeviceBoundClasses() {
        let keybag = BackupKeybag(archiveKey: SymmetricKey(randomFrom: SystemEntropy()))
        for protection in ProtectionClass.allCases {
            #expect((keybag.key(for: protection) == nil) == protection.isThisDeviceOnly, "\(protection.name)")
        }
    }
}
