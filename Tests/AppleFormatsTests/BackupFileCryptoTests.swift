import AppleFormats
import Crypto
import Foundation
import Testing

@Suite("iOS backup files: names, blobs, wrapped keys")
struct BackupFileCryptoTests {
    @Test("a file's id is the SHA-1 of DOMAIN-PATH, as IOS-BACKUP.md's example")
    func fileID() {
        #expect(BackupFileCrypto.fileID(domain: "KeychainDomain", relativePath: "keychain-backup.plist") == "51a4616e576dd33cd2abadfea874eb8ff246bf0e")
    }

    @Test("blobs are padded always (an empty file is one block, an aligned one gains a block) and open back; bad padding is refused")
    func blobs() throws {
        let key = SymmetricKey(size: .bits256)
        for length in [0, 1, 15, 16, 17, 4096] {
            let plaintext = Data((0..<length).map { UInt8(truncatingIfNeeded: $0) })
            let sealed = try BackupFileCrypto.seal(plaintext, key: key)
            #expect(sealed.count == (length / 16 + 1) * 16, "\(length) bytes")
            #expect(try BackupFileCrypto.open(sealed, key: key) == plaintext)
        }
        let sealed = try BackupFileCrypto.seal(Data("secret".utf8), key: key)
        let other = SymmetricKey(size: .bits256)
        // Under another key the padding almost never checks; a Manifest.db may still be read raw.
        if (try? BackupFileCrypto.open(sealed, key: other)) == nil {
            #expect(try BackupFileCrypto.open(sealed, key: other, requirePadding: false).count == 16)
        }
        #expect(throws: BackupFileCryptoError.notWholeBlocks(5)) { try BackupFileCrypto.open(Data(count: 5), key: key) }
        #expect(throws: BackupFileCryptoError.notWholeBlocks(0)) { try BackupFileCrypto.open(Data(), key: key) }
    }

    @Test("a class-wrapped key: little-endian class, 40-byte wrap; unwraps under its class key only")
    func classWrapped() throws {
        let classKey = SymmetricKey(size: .bits256)
        let fileKey = SymmetricKey(size: .bits256)
        let wrapped = try ClassWrappedKey(wrapping: fileKey, protectionClass: 4, under: classKey)
        #expect(wrapped.bytes.count == 44 && wrapped.bytes.prefix(4) == [4, 0, 0, 0])
        let read = try ClassWrappedKey(bytes: wrapped.bytes)
        #expect(read == wrapped && read.protectionClass == 4)
        #expect(try read.unwrap(with: classKey) == fileKey)
        #expect(throws: BackupFileCryptoError.unwrapFailed(4)) { try read.unwrap(with: SymmetricKey(size: .bits256)) }
        #expect(throws: BackupFileCryptoError.wrappedKeyLength(43)) { try ClassWrappedKey(bytes: wrapped.bytes.dropLast()) }
    }
}
