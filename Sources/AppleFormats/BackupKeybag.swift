package import Crypto
package import Foundation
import _CryptoExtras

/// The keybag of an encrypted iOS backup (`Manifest.plist`'s `BackupKeyBag`): TLVs of a 4-byte
/// ASCII tag, a big-endian u32 length and the value (four-byte values are integers). A header,
/// then one block of five TLVs per protection class. The password opens it in two PBKDF2 steps;
/// each class key is an RFC 3394 wrap under the result. (`IOS-BACKUP.md`, sections 3 and 4.)
package struct BackupKeybag: Equatable, Sendable {
    package var version: UInt32 = 4
    package var type: UInt32 = 1
    package var uuid: [UInt8]
    package var hmacKey: [UInt8]
    package var wrap: UInt32 = 0
    /// PBKDF2-SHA1's salt and rounds (the second step).
    package var salt: [UInt8]
    package var iterations: UInt32
    package var dpwt: UInt32 = 1
    /// PBKDF2-SHA256's rounds and salt (the first step); 0 and empty in a backup of iOS before
    /// 10.2, whose keybag has neither (`DPIC`, `DPSL`) and whose password takes the second alone.
    package var dataProtectionIterations: UInt32
    package var dataProtectionSalt: [UInt8]
    package var classes: [ClassKey]

    package struct ClassKey: Equatable, Sendable {
        package var uuid: [UInt8]
        /// 1–5 for files, 6–11 for keychain items.
        package var protectionClass: UInt32
        /// Bit 1: tangled with the device's own key (only that device opens it); bit 2: wrapped
        /// under the password's key.
        package var wrap: UInt32
        package var keyType: UInt32 = 0
        package var wrappedKey: [UInt8]

        package static let deviceWrap: UInt32 = 1
        package static let passwordWrap: UInt32 = 2

        package init(uuid: [UInt8], protectionClass: UInt32, wrap: UInt32, keyType: UInt32 = 0, wrappedKey: [UInt8]) {
            self.uuid = uuid
            self.protectionClass = protectionClass
            self.wrap = wrap
            self.keyType = keyType
            self.wrappedKey = wrappedKey
        }
    }

    /// The most PBKDF2 rounds a keybag may ask of its reader, as iphone-backup-decrypt bounds
    /// them: a phone uses 10,000,000 and 10,000.
    package static let maximumDataProtectionIterations: UInt32 = 20_000_000
    package static let maximumIterations: UInt32 = 1_000_000

    package init(
        uuid: [UInt8], hmacKey: [UInt8], salt: [UInt8], iterations: UInt32, dataProtectionIterations: UInt32, dataProtectionSalt: [UInt8],
        classes: [ClassKey]
    ) {
        self.uuid = uuid
        self.hmacKey = hmacKey
        self.salt = salt
        self.iterations = iterations
        self.dataProtectionIterations = dataProtectionIterations
        self.dataProtectionSalt = dataProtectionSalt
        self.classes = classes
    }

    // MARK: TLV

    /// Reads a keybag: lengths checked against what remains, integers where integers belong,
    /// class blocks of the five TLVs in order, Curve25519 keys (never in backups) refused.
    package init(tlv data: Data) throws {
        let bytes = Array(data)
        var offset = 0
        var header: [String: [UInt8]] = [:]
        var classes: [ClassKey] = []
        var block: [String: [UInt8]]?
        func closeBlock() throws {
            guard let open = block else { return }
            for tag in ["UUID", "CLAS", "WRAP", "KTYP", "WPKY"] where open[tag] == nil {
                throw BackupKeybagError.malformed("a class block has no \(tag)")
            }
            let keyType = try Self.integer(open["KTYP"]!, "KTYP")
            guard keyType == 0 else { throw BackupKeybagError.malformed("a class key of type \(keyType) (only AES keys are in backups)") }
            let wrapped = open["WPKY"]!
            guard wrapped.count == 40 else { throw BackupKeybagError.malformed("a wrapped class key of \(wrapped.count) bytes, not 40") }
            classes.append(
                ClassKey(
                    uuid: open["UUID"]!, protectionClass: try Self.integer(open["CLAS"]!, "CLAS"), wrap: try Self.integer(open["WRAP"]!, "WRAP"),
                    keyType: keyType, wrappedKey: wrapped))
            block = nil
        }
        while offset < bytes.count {
            guard bytes.count - offset >= 8 else { throw BackupKeybagError.malformed("it ends inside a tag") }
            let tag = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let length = Int(BigEndian.number(bytes[offset + 4..<offset + 8]))
            offset += 8
            guard length <= bytes.count - offset else { throw BackupKeybagError.malformed("\(tag) claims \(length) bytes, more than remain") }
            let value = Array(bytes[offset..<offset + length])
            offset += length
            if tag == "UUID", header["UUID"] != nil {
                try closeBlock()
                block = ["UUID": value]
            } else if block != nil {
                guard block![tag] == nil else { throw BackupKeybagError.malformed("a class block repeats \(tag)") }
                block![tag] = value
            } else {
                header[tag] = value
            }
        }
        try closeBlock()
        for tag in ["VERS", "TYPE", "UUID", "SALT", "ITER"] where header[tag] == nil {
            throw BackupKeybagError.malformed("its header has no \(tag)")
        }
        version = try Self.integer(header["VERS"]!, "VERS")
        type = try Self.integer(header["TYPE"]!, "TYPE") & ~0xC000_0000
        guard type <= 3 else { throw BackupKeybagError.malformed("a keybag of type \(type)") }
        uuid = header["UUID"]!
        hmacKey = header["HMCK"] ?? []
        wrap = try header["WRAP"].map { try Self.integer($0, "WRAP") } ?? 0
        salt = header["SALT"]!
        iterations = try Self.integer(header["ITER"]!, "ITER")
        dpwt = try header["DPWT"].map { try Self.integer($0, "DPWT") } ?? 1
        guard (header["DPIC"] == nil) == (header["DPSL"] == nil) else { throw BackupKeybagError.malformed("its header has one of DPIC and DPSL") }
        dataProtectionIterations = try header["DPIC"].map { try Self.integer($0, "DPIC") } ?? 0
        dataProtectionSalt = header["DPSL"] ?? []
        self.classes = classes
        guard (1...Self.maximumIterations).contains(iterations),
            header["DPIC"] == nil || (1...Self.maximumDataProtectionIterations).contains(dataProtectionIterations)
        else {
            throw BackupKeybagError.malformed(
                "it asks for \(dataProtectionIterations) and \(iterations) rounds of key derivation (at most \(Self.maximumDataProtectionIterations) and \(Self.maximumIterations))"
            )
        }
    }

    /// The keybag as a phone writes it: the header in its order, then each class block.
    package var tlv: Data {
        func field(_ tag: String, _ value: [UInt8]) -> [UInt8] { Array(tag.utf8) + Self.bigEndian(UInt32(value.count)) + value }
        var bytes = field("VERS", Self.bigEndian(version)) + field("TYPE", Self.bigEndian(type)) + field("UUID", uuid)
        bytes += field("HMCK", hmacKey) + field("WRAP", Self.bigEndian(wrap)) + field("SALT", salt) + field("ITER", Self.bigEndian(iterations))
        bytes += field("DPWT", Self.bigEndian(dpwt))
        if hasDataProtectionStep { bytes += field("DPIC", Self.bigEndian(dataProtectionIterations)) + field("DPSL", dataProtectionSalt) }
        for key in classes {
            bytes += field("UUID", key.uuid) + field("CLAS", Self.bigEndian(key.protectionClass)) + field("WRAP", Self.bigEndian(key.wrap))
            bytes += field("KTYP", Self.bigEndian(key.keyType)) + field("WPKY", key.wrappedKey)
        }
        return Data(bytes)
    }

    private static func integer(_ value: [UInt8], _ tag: String) throws -> UInt32 {
        guard value.count == 4 else { throw BackupKeybagError.malformed("\(tag) holds \(value.count) bytes, not a 4-byte integer") }
        return UInt32(BigEndian.number(value))
    }

    private static func bigEndian(_ number: UInt32) -> [UInt8] { BigEndian.bytes(UInt64(number), count: 4) }

    // MARK: Keys

    /// Whether the password first takes PBKDF2-SHA256 (iOS 10.2 and later).
    package var hasDataProtectionStep: Bool { dataProtectionIterations > 0 }

    /// The key that unwraps the class keys: PBKDF2-SHA256 over the password with `DPSL` and
    /// `DPIC` rounds, then PBKDF2-SHA1 over that with `SALT` and `ITER` rounds. Seconds of work
    /// at a phone's 10,000,000 rounds. Before iOS 10.2, the second step alone.
    package func passwordKey(_ password: some DataProtocol) throws -> SymmetricKey {
        guard hasDataProtectionStep else {
            return try KDF.Insecure.PBKDF2.deriveKey(
                from: password, salt: salt, using: .insecureSHA1, outputByteCount: 32, unsafeUncheckedRounds: Int(iterations))
        }
        let stretched = try KDF.Insecure.PBKDF2.deriveKey(
            from: password, salt: dataProtectionSalt, using: .sha256, outputByteCount: 32, unsafeUncheckedRounds: Int(dataProtectionIterations))
        return try stretched.withUnsafeBytes { bytes in
            try KDF.Insecure.PBKDF2.deriveKey(from: bytes, salt: salt, using: .insecureSHA1, outputByteCount: 32, unsafeUncheckedRounds: Int(iterations))
        }
    }

    /// The class keys the password's key opens, by class. Classes also tangled with a device's
    /// own key (`sealedToDevice`) open only with `deviceKey`, the key of the device that made
    /// the backup; without it they are left out. A password-wrapped key that does not unwrap
    /// means a wrong password; a device-wrapped one, another device.
    package func classKeys(with passwordKey: SymmetricKey?, deviceKey: SymmetricKey? = nil) throws -> [UInt32: SymmetricKey] {
        var keys: [UInt32: SymmetricKey] = [:]
        for key in classes {
            let byPassword = key.wrap & ClassKey.passwordWrap != 0
            let byDevice = key.wrap & ClassKey.deviceWrap != 0
            if byDevice && deviceKey == nil { continue }
            var opened: [UInt8]
            if byPassword {
                guard let passwordKey else { continue }
                do {
                    opened = Array(try AES.KeyWrap.unwrap(key.wrappedKey, using: passwordKey).withUnsafeBytes { Data($0) })
                } catch {
                    throw BackupKeybagError.wrongPassword
                }
            } else if byDevice, let deviceKey {
                // Device-only (an unencrypted backup's keychain classes): Keyferry wraps these
                // under the device's key, where a phone's format is its own secret.
                guard let unwrapped = try? AES.KeyWrap.unwrap(key.wrappedKey, using: deviceKey) else { continue }
                keys[key.protectionClass] = unwrapped
                continue
            } else {
                continue
            }
            if byDevice, let deviceKey { opened = try Self.untangled(opened, deviceKey: deviceKey) }
            keys[key.protectionClass] = SymmetricKey(data: opened)
        }
        return keys
    }

    /// A class key tied to a device, as a phone ties its ThisDeviceOnly classes to key 0x835:
    /// AES-256-CBC under the device key, zero IV, no padding (the key is two whole blocks).
    package static func tangled(_ classKey: SymmetricKey, deviceKey: SymmetricKey) throws -> SymmetricKey {
        let bytes = classKey.withUnsafeBytes { Data($0) }
        return SymmetricKey(data: try AES._CBC.encrypt(bytes, using: deviceKey, iv: zeroIV, noPadding: true))
    }

    private static func untangled(_ bytes: [UInt8], deviceKey: SymmetricKey) throws -> [UInt8] {
        Array(try AES._CBC.decrypt(bytes, using: deviceKey, iv: zeroIV, noPadding: true))
    }

    private static let zeroIV = try! AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16))

    /// Classes whose keys only the device that made the backup can open.
    package var sealedToDevice: Set<UInt32> { Set(classes.filter { $0.wrap & ClassKey.deviceWrap != 0 }.map(\.protectionClass)) }
}

/// Why a backup keybag cannot be used.
package enum BackupKeybagError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    case wrongPassword

    package var description: String {
        switch self {
        case .malformed(let detail): "the backup's keybag is malformed: \(detail)"
        case .wrongPassword: "wrong password: it does not open the backup's keybag"
        }
    }
}
