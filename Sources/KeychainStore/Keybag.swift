import Foundation
import GRDB
import KeychainModel
import KeyferryCrypto

/// The device keybag: one random key per protection class, each with a metadata key sealed
/// under it. Class keys of passcode-protected classes are wrapped with a key derived from the
/// passcode (Argon2id) tangled with the hardware UID; class D keys, and every key while no
/// passcode is set, with a UID-derived key alone. See Protocol/store.md.
struct Keybag: Sendable {
    /// Keys derived from the hardware UID; the UID itself is not kept beyond `init`.
    let uidWrappingKey: SymmetricKey
    let passcodeTangleKey: SymmetricKey
    /// Keys the hash that tells a wrong passcode tried again from a new one.
    let attemptKey: SymmetricKey
    let entropy: any EntropySource

    init(uid: SymmetricKey, entropy: any EntropySource) {
        uidWrappingKey = uid.derive(context: "kfuidwrp")
        passcodeTangleKey = uid.derive(context: "kfpasscd")
        attemptKey = uid.derive(context: "kfattmpt")
        self.entropy = entropy
    }

    enum Wrapping: String { case uid, passcode }

    struct Settings {
        var salt: [UInt8]
        var parameters: PasswordHashParameters
        var passcodeSet: Bool
        var attempts: PasscodeAttempts
        var biometryEnrollment: [UInt8]?

        static func load(_ db: Database) throws -> Settings {
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM keybag WHERE id = 1") else {
                throw DeviceError(.corrupt, "the keychain database has no keybag.")
            }
            return Settings(
                salt: [UInt8](row["salt"] as Data),
                parameters: PasswordHashParameters(operations: UInt64(row["kdf_operations"] as Int64), memoryBytes: UInt64(row["kdf_memory"] as Int64)),
                passcodeSet: row["passcode_set"],
                attempts: PasscodeAttempts(
                    failed: row["failed_attempts"], lastWrong: (row["last_wrong_passcode"] as Data?).map { [UInt8]($0) },
                    lastFailure: (row["last_failure_at"] as Double?).map(Date.init(timeIntervalSinceReferenceDate:))),
                biometryEnrollment: (row["biometry_enrollment"] as Data?).map { [UInt8]($0) })
        }
    }

    /// The biometry enrollment items of `biometryCurrentSet` are bound to; nil when none.
    static func saveBiometryEnrollment(_ enrollment: [UInt8]?, _ db: Database) throws {
        try db.execute(sql: "UPDATE keybag SET biometry_enrollment = ? WHERE id = 1", arguments: [enrollment.map { Data($0) }])
    }

    static func save(_ attempts: PasscodeAttempts, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE keybag SET failed_attempts = ?, last_wrong_passcode = ?, last_failure_at = ? WHERE id = 1",
            arguments: [attempts.failed, attempts.lastWrong.map { Data($0) }, attempts.lastFailure?.timeIntervalSinceReferenceDate])
    }

    /// What identifies a passcode among wrong ones tried, and nothing more.
    /// What identifies a passcode among wrong ones tried, and nothing more: a hash of its
    /// stretched key, so that checking a candidate against it costs the same Argon2id as trying
    /// the candidate on the keybag (a copy of the device directory learns nothing cheaper).
    func attemptHash(_ passcodeKey: SymmetricKey) -> [UInt8] {
        passcodeKey.withUnsafeBytes { KeyedHash.digest(of: $0, key: attemptKey, length: 16) }
    }

    // MARK: Wrapping

    static func classKeyAD(_ protection: ProtectionClass) -> [UInt8] { Array("keyferry.classkey.v1.\(protection.rawValue)".utf8) }
    static func metadataKeyAD(_ protection: ProtectionClass) -> [UInt8] { Array("keyferry.metadatakey.v1.\(protection.rawValue)".utf8) }

    /// The key that wraps a class key: UID-only, or the passcode tangled with the UID.
    func passcodeKey(_ passcode: String, settings: Settings) throws -> SymmetricKey {
        let stretched = try PasswordHash.argon2id(password: Array(passcode.utf8), salt: settings.salt, parameters: settings.parameters)
        return passcodeTangleKey.tangled(with: stretched)
    }

    private func write(_ db: Database, _ protection: ProtectionClass, _ keys: ClassKeys, under wrappingKey: SymmetricKey, _ wrapping: Wrapping) throws {
        let wrapped = AEAD.wrap(keys.classKey, under: wrappingKey, associatedData: Self.classKeyAD(protection), entropy: entropy)
        let wrappedMetadata = AEAD.wrap(keys.metadataKey, under: keys.classKey, associatedData: Self.metadataKeyAD(protection), entropy: entropy)
        try db.execute(
            sql: "INSERT OR REPLACE INTO class_key (class, wrapping, wrapped_key, wrapped_metadata_key) VALUES (?, ?, ?, ?)",
            arguments: [protection.rawValue, wrapping.rawValue, wrapped, wrappedMetadata])
    }

    private func freshClassKeys() -> ClassKeys {
        ClassKeys(classKey: SymmetricKey(randomFrom: entropy), metadataKey: SymmetricKey(randomFrom: entropy))
    }

    private func wrapping(for protection: ProtectionClass, passcodeKey: SymmetricKey?) -> (SymmetricKey, Wrapping) {
        if protection.isPasscodeProtected, let passcodeKey { return (passcodeKey, .passcode) }
        return (uidWrappingKey, .uid)
    }

    // MARK: Lifecycle

    /// Makes a new keybag: fresh class and metadata keys for every class (`akpu` only with a
    /// passcode, or with `passcodeClass`: a device that reports a passcode it does not have,
    /// where the UID wraps it). Returns the unwrapped keys, since a device with a passcode just
    /// set is unlocked.
    func create(_ db: Database, passcode: String?, parameters: PasswordHashParameters, passcodeClass: Bool = false) throws -> [ProtectionClass: ClassKeys] {
        let settings = Settings(
            salt: entropy.bytes(PasswordHashParameters.saltByteCount), parameters: parameters,
            passcodeSet: passcode != nil, attempts: PasscodeAttempts(), biometryEnrollment: nil)
        try db.execute(
            sql: "INSERT INTO keybag (id, salt, kdf_operations, kdf_memory, passcode_set) VALUES (1, ?, ?, ?, ?)",
            arguments: [Data(settings.salt), Int64(parameters.operations), Int64(parameters.memoryBytes), passcode != nil])
        let passcodeKey = try passcode.map { try self.passcodeKey($0, settings: settings) }
        var keys = [ProtectionClass: ClassKeys]()
        for protection in ProtectionClass.allCases where protection != .whenPasscodeSetThisDeviceOnly || passcode != nil || passcodeClass {
            let fresh = freshClassKeys()
            let (key, kind) = wrapping(for: protection, passcodeKey: passcodeKey)
            try write(db, protection, fresh, under: key, kind)
            keys[protection] = fresh
        }
        return keys
    }

    /// Unwraps every class key that `passcode` (or the UID alone) can open. Throws
    /// `errSecAuthFailed` when a passcode-wrapped key does not open.
    func unwrap(_ db: Database, passcode: String?) throws -> [ProtectionClass: ClassKeys] {
        let settings = try Settings.load(db)
        return try unwrap(db, passcodeKey: try passcode.map { try self.passcodeKey($0, settings: settings) })
    }

    /// `unwrap` with the passcode already stretched (`passcodeKey`).
    func unwrap(_ db: Database, passcodeKey: SymmetricKey?) throws -> [ProtectionClass: ClassKeys] {
        var keys = [ProtectionClass: ClassKeys]()
        for row in try Row.fetchAll(db, sql: "SELECT * FROM class_key") {
            guard let protection = ProtectionClass(rawValue: row["class"]), let kind = Wrapping(rawValue: row["wrapping"]) else {
                throw DeviceError(.corrupt, "the keybag holds a class key Keyferry does not know.")
            }
            let wrappingKey: SymmetricKey
            switch kind {
            case .uid: wrappingKey = uidWrappingKey
            case .passcode:
                guard let passcodeKey else { continue }
                wrappingKey = passcodeKey
            }
            do {
                let classKey = try AEAD.unwrap(row["wrapped_key"] as Data, under: wrappingKey, associatedData: Self.classKeyAD(protection))
                let metadataKey = try AEAD.unwrap(row["wrapped_metadata_key"] as Data, under: classKey, associatedData: Self.metadataKeyAD(protection))
                keys[protection] = ClassKeys(classKey: classKey, metadataKey: metadataKey)
            } catch CryptoError.authenticationFailed where kind == .passcode {
                throw KeychainError(.authFailed, "the passcode is not correct.")
            } catch CryptoError.authenticationFailed {
                throw DeviceError(
                    .corrupt,
                    "the \(protection.name) class key does not open with this device's hardware UID; the keybag is damaged or belongs to another device.")
            }
        }
        return keys
    }

    /// Rewraps the passcode-protected class keys under a new passcode (or under the UID alone
    /// when `newPasscode` is nil). Setting a first passcode creates the `akpu` class; removing it
    /// destroys that class key.
    /// With `keepingPasscodeClass`, removing the passcode keeps the `akpu` class key, wrapped by
    /// the UID: a device that reports a passcode it does not have (the Simulator).
    func rewrap(
        _ db: Database, keys: [ProtectionClass: ClassKeys], newPasscode: String?, keepingPasscodeClass: Bool = false
    ) throws -> [ProtectionClass: ClassKeys] {
        var settings = try Settings.load(db)
        // A fresh salt on every change: the old passcode's derived key opens nothing new.
        settings.salt = entropy.bytes(PasswordHashParameters.saltByteCount)
        try db.execute(sql: "UPDATE keybag SET salt = ?, passcode_set = ? WHERE id = 1", arguments: [Data(settings.salt), newPasscode != nil])
        try Self.save(PasscodeAttempts(), db)
        let passcodeKey = try newPasscode.map { try self.passcodeKey($0, settings: settings) }
        var keys = keys
        if newPasscode == nil, keepingPasscodeClass {
            keys[.whenPasscodeSetThisDeviceOnly] = keys[.whenPasscodeSetThisDeviceOnly] ?? freshClassKeys()
        } else if newPasscode == nil {
            keys[.whenPasscodeSetThisDeviceOnly] = nil
            try db.execute(sql: "DELETE FROM class_key WHERE class = ?", arguments: [ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue])
        } else if keys[.whenPasscodeSetThisDeviceOnly] == nil {
            keys[.whenPasscodeSetThisDeviceOnly] = freshClassKeys()
        }
        for (protection, classKeys) in keys where protection.isPasscodeProtected {
            let (key, kind) = wrapping(for: protection, passcodeKey: passcodeKey)
            try write(db, protection, classKeys, under: key, kind)
        }
        return keys
    }
}
