import Crypto
import Foundation
import Testing

@testable import AppleFormats

@Suite("AES-GCM as backups seal keychain items")
struct KeychainGCMTests {
    static func bytes(_ hex: String) -> [UInt8] { stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! } }
    static let key = SymmetricKey(data: (0..<32).map(UInt8.init))

    @Test("the empty-IV vector of IOS-BACKUP.md (checked there by ios-backup-manager's own implementation) seals and opens")
    func emptyIVVector() throws {
        let plaintext = Array("keyferry empty-iv gcm".utf8)
        let sealed = try KeychainGCM.seal(plaintext, key: Self.key)
        #expect(sealed == Self.bytes("9b380fc82fcbed9c8693f6413cbb1b54789cd2bdd8bc6b1a92a10b37fa13c3d23826c634a6"))
        #expect(try KeychainGCM.open(sealed, key: Self.key) == plaintext)
    }

    @Test("with a 12-byte IV and AAD it agrees with swift-crypto's AES.GCM, byte for byte, at every length around a block")
    func agreesWithSwiftCrypto() throws {
        for length in [0, 1, 15, 16, 17, 31, 32, 33, 100] {
            let key = SymmetricKey(size: .bits256)
            let nonce = AES.GCM.Nonce()
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let aad = Array("keyferry aad \(length)".utf8)
            let reference = try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad)
            let ours = try KeychainGCM.seal(plaintext, key: key, iv: Array(nonce), aad: aad)
            #expect(ours == Array(reference.ciphertext) + Array(reference.tag), "\(length) bytes")
            #expect(try KeychainGCM.open(ours, key: key, iv: Array(nonce), aad: aad) == plaintext)
        }
    }

    @Test("GHASH's table of sixteen multiples multiplies as the bit-by-bit definition does")
    func tableMultiplication() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let hashKey = KeychainGCM.Block(high: generator.next(), low: generator.next())
            let value = KeychainGCM.Block(high: generator.next(), low: generator.next())
            #expect(KeychainGCM.GHash.Table(hashKey).multiply(value) == value.times(hashKey))
        }
        let one = KeychainGCM.Block(high: 1 << 63, low: 0)
        let hashKey = KeychainGCM.Block(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        #expect(KeychainGCM.GHash.Table(hashKey).multiply(one) == hashKey, "1 is the field's unit")
    }

    @Test("a flipped bit, another key, missing AAD or a short input is refused")
    func refusals() throws {
        let sealed = try KeychainGCM.seal(Array("secret".utf8), key: Self.key)
        for index in sealed.indices {
            var flipped = sealed
            flipped[index] ^= 0x01
            #expect(throws: KeychainGCMError.tagMismatch) { try KeychainGCM.open(flipped, key: Self.key) }
        }
        #expect(throws: KeychainGCMError.tagMismatch) { try KeychainGCM.open(sealed, key: SymmetricKey(size: .bits256)) }
        let withAAD = try KeychainGCM.seal([1, 2, 3], key: Self.key, iv: Array(repeating: 9, count: 12), aad: [7])
        #expect(throws: KeychainGCMError.tagMismatch) { try KeychainGCM.open(withAAD, key: Self.key, iv: Array(repeating: 9, count: 12)) }
        #expect(throws: KeychainGCMError.tooShort) { try KeychainGCM.open(Array(sealed.prefix(15)), key: Self.key) }
    }
}
