import AppleFormats
import Crypto
import Foundation
import Testing

@Suite("iOS backup keybags")
struct BackupKeybagTests {
    static func bytes(_ hex: String) -> [UInt8] { stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! } }

    /// pyiosbackup's fixture, as IOS-BACKUP.md quotes it: password `0000`, both salts twenty
    /// zero bytes, a phone's rounds, and a class key of 32 zero bytes.
    static let fixture = BackupKeybag(
        uuid: [UInt8](repeating: 1, count: 16), hmacKey: [UInt8](repeating: 2, count: 40), salt: [UInt8](repeating: 0, count: 20),
        iterations: 10_000, dataProtectionIterations: 10_000_000, dataProtectionSalt: [UInt8](repeating: 0, count: 20),
        classes: [
            .init(
                uuid: [UInt8](repeating: 3, count: 16), protectionClass: 3, wrap: 2,
                wrappedKey: bytes("528c9c5171bf8bef1ea397cf29d2a838c90529df02a6ad2f823a1c6f3a5b2040e2a309c520c6a2ab")),
            .init(uuid: [UInt8](repeating: 4, count: 16), protectionClass: 9, wrap: 3, wrappedKey: [UInt8](repeating: 5, count: 40)),
        ])
    static let passwordKey = SymmetricKey(data: bytes("ec8edc160b5745ccae000bfb4787630f322821191fba7eea38feab2c6307cd9b"))

    @Test("the fixture's class key unwraps to 32 zero bytes under its password key; a device-tangled class is left sealed")
    func classKeys() throws {
        let keys = try Self.fixture.classKeys(with: Self.passwordKey)
        #expect(keys.count == 1)
        #expect(keys[3]?.withUnsafeBytes { Array($0) } == [UInt8](repeating: 0, count: 32))
        #expect(Self.fixture.sealedToDevice == [9])
        #expect(throws: BackupKeybagError.wrongPassword) { try Self.fixture.classKeys(with: SymmetricKey(size: .bits256)) }
    }

    @Test("the password `0000` becomes the fixture's key through a phone's 10,000,000 + 10,000 rounds of PBKDF2")
    func passwordKey() throws {
        let key = try Self.fixture.passwordKey(Array("0000".utf8))
        #expect(key == Self.passwordKey)
    }

    @Test("TLV bytes round-trip, in a phone's order")
    func roundTrip() throws {
        let tlv = Self.fixture.tlv
        #expect(tlv.prefix(4) == Data("VERS".utf8))
        #expect(try BackupKeybag(tlv: tlv) == Self.fixture)
    }

    @Test(
        "a malformed keybag is refused before any key derivation: truncation, lengths past the end, missing fields, a Curve25519 key, absurd rounds",
        arguments: 0..<7)
    func malformed(case index: Int) {
        var keybag = Self.fixture
        let bytes: Data
        switch index {
        case 0: bytes = Self.fixture.tlv.prefix(30)
        case 1: bytes = Data("VERS".utf8) + Data([0xFF, 0xFF, 0xFF, 0xF0, 0, 0, 0, 4])
        case 2: bytes = Self.fixture.tlv.dropLast(44)
        case 3:
            keybag.classes[0].keyType = 1
            bytes = keybag.tlv
        case 4:
            keybag.dataProtectionIterations = 4_000_000_000
            bytes = keybag.tlv
        case 5:
            keybag.iterations = 0
            bytes = keybag.tlv
        default:
            keybag.classes[0].wrappedKey = [1, 2, 3]
            bytes = keybag.tlv
        }
        #expect(throws: BackupKeybagError.self) { try BackupKeybag(tlv: bytes) }
    }
}
