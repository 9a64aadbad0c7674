public import Foundation

// What a restore did, item by item: the answer of a restore (`keyferry backup restore`, the
// control API's transfer, KeyferryTesting's restore onto a new device), read by scripts and
// users' tests alike, so it lives with the other shared values rather than with the archive
// code that produces it.

/// Whether an archive's sections are sealed under its password, or only compressed and digested.
public enum ArchiveMode: String, Codable, Sendable {
    /// Sections sealed under a key that only the backup password opens.
    case encrypted
    /// Sections in plain (compressed), each with a keyed digest.
    case unencrypted
}

/// What proves that an archive's sections are the ones its writer wrote.
public enum ArchiveAuthenticity: String, Codable, Sendable {
    /// Encrypted: sealed under a key that only its password opens.
    case password
    /// Unencrypted, read with the keys of the device that wrote it, whose digests no one else
    /// can compute.
    case device
    /// Unencrypted, read away from the device that wrote it (or of format 1): its checksums
    /// detect damage, not forgery, since anyone can compute them.
    case checksums
    /// An encrypted iOS backup: its keychain items are authenticated (AES-GCM) under keys only
    /// the password opens; its files are encrypted too, but carry no MAC (AES-CBC).
    case keychainItems
    /// An unencrypted iOS backup: nothing in it is authenticated.
    case unauthenticated
}

/// The two kinds of backup Keyferry reads: its own archives, and iOS backup folders.
public enum BackupFormat: String, Codable, Sendable {
    case keyferry
    case ios
}

/// What a restore did with every item of the archive, and why.
public struct RestoreReport: Codable, Sendable {
    /// The archive came from the target itself (same hardware identity).
    public var sameDevice: Bool
    public var mode: ArchiveMode
    /// What proved the archive's sections genuine: its password, the target (the device that
    /// wrote an unencrypted archive), or nothing but checksums (an unencrypted archive from
    /// another device, whose apps and files anyone could have written).
    public var authenticity: ArchiveAuthenticity
    /// When the archive was made (by its own header).
    public var archiveCreated: Date?
    /// When the target last backed itself up, if that is later than this archive of it: an
    /// older archive restores older secrets, and may have been put in place of the newest.
    public var newerBackupOnDevice: Date?
    public var items = ItemOutcomes()
    /// Items the source never exported, by `CLASS.PROTECTION`: they are not in the archive.
    public var neverExported: [String: Int] = [:]
    public var apps: [String] = []
    public var sandboxFiles = 0
    /// What wrote the backup: a Keyferry archive, or an iOS backup folder.
    public var format: BackupFormat = .keyferry
    /// iOS backups: files outside any app's Documents and UserDefaults, by domain; not restored.
    public var filesNotRestored: [String: Int] = [:]
    /// The target's own (non-synchronizable) items that the restore replaced and that are not
    /// back as they were: not in the archive, or in it in an older version. Apple's restore
    /// replaces what is device-local; this says what that cost.
    public var localItemsLost: [LocalItemLost] = []

    public struct LocalItemLost: Codable, Sendable {
        public enum Reason: String, Codable, Sendable, CaseIterable {
            /// Added after the backup was made (or never in it): gone.
            case notInArchive
            /// Changed after the backup was made: back as the archive holds it.
            case olderInArchive
        }

        public var name: String?
        public var itemClass: ItemClass
        public var accessGroup: String
        public var reason: Reason

        private enum CodingKeys: String, CodingKey { case name, itemClass = "class", accessGroup, reason }

        package init(name: String?, itemClass: ItemClass, accessGroup: String, reason: Reason) {
            self.name = name
            self.itemClass = itemClass
            self.accessGroup = accessGroup
            self.reason = reason
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(name, forKey: .name)
            try container.encode(itemClass.name, forKey: .itemClass)
            try container.encode(accessGroup, forKey: .accessGroup)
            try container.encode(reason, forKey: .reason)
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let className = try container.decode(String.self, forKey: .itemClass)
            guard let itemClass = ItemClass(name: className) else {
                throw DecodingError.dataCorruptedError(forKey: .itemClass, in: container, debugDescription: "'\(className)' is not one of Apple's names")
            }
            self.itemClass = itemClass
            name = try container.decodeIfPresent(String.self, forKey: .name)
            accessGroup = try container.decode(String.self, forKey: .accessGroup)
            reason = try container.decode(Reason.self, forKey: .reason)
        }
    }

    package init(sameDevice: Bool, mode: ArchiveMode, authenticity: ArchiveAuthenticity, archiveCreated: Date?, newerBackupOnDevice: Date?) {
        self.sameDevice = sameDevice
        self.mode = mode
        self.authenticity = authenticity
        self.archiveCreated = archiveCreated
        self.newerBackupOnDevice = newerBackupOnDevice
    }

    public struct ItemOutcome: Codable, Sendable {
        public var uuid: UUID
        public var itemClass: ItemClass
        public var protection: ProtectionClass
        public var synchronizable: Bool
        public var accessGroup: String
        /// `account @ service` and the like: from an encrypted archive, or from the item itself
        /// once it opened.
        public var name: String?
        public var restored: Bool
        public var reason: Reason?
        /// Restored, but no installed app is entitled to its access group yet: the item is seen
        /// once one is installed.
        public var waitingForApp: Bool

        /// The outcome of an item the store wrote but could not read back (`unreadable`).
        package func checked(against unreadable: Set<UUID>) -> ItemOutcome {
            guard restored, unreadable.contains(uuid) else { return self }
            var dropped = self
            dropped.replace(with: .doesNotReadBack)
            return dropped
        }

        /// Not restored after all, for `reason`.
        package mutating func replace(with reason: Reason) {
            (restored, self.reason, waitingForApp) = (false, reason, false)
        }

        package init(
            uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool, accessGroup: String, name: String?, reason: Reason?,
            waitingForApp: Bool
        ) {
            self.uuid = uuid
            self.name = name
            self.itemClass = itemClass
            self.protection = protection
            self.synchronizable = synchronizable
            self.accessGroup = accessGroup
            restored = reason == nil
            self.reason = reason
            self.waitingForApp = waitingForApp
        }

        // Spelled as everywhere a user reads items: `"class": "genericPassword"`,
        // `"accessible": "whenUnlocked"`, and the reason as a sentence beside its code.
        private enum CodingKeys: String, CodingKey {
            case uuid, itemClass = "class", protection = "accessible", synchronizable, accessGroup, name, restored, reason, why, waitingForApp
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(uuid, forKey: .uuid)
            try container.encode(itemClass.name, forKey: .itemClass)
            try container.encode(protection.name, forKey: .protection)
            try container.encode(synchronizable, forKey: .synchronizable)
            try container.encode(accessGroup, forKey: .accessGroup)
            try container.encodeIfPresent(name, forKey: .name)
            try container.encode(restored, forKey: .restored)
            try container.encodeIfPresent(reason, forKey: .reason)
            try container.encodeIfPresent(reason?.sentence, forKey: .why)
            try container.encode(waitingForApp, forKey: .waitingForApp)
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            func named<Value: AppleNamed>(_ key: CodingKeys) throws -> Value {
                let text = try container.decode(String.self, forKey: key)
                guard let value = Value(name: text) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "'\(text)' is not one of Apple's names")
                }
                return value
            }
            uuid = try container.decode(UUID.self, forKey: .uuid)
            itemClass = try named(.itemClass)
            protection = try named(.protection)
            synchronizable = try container.decode(Bool.self, forKey: .synchronizable)
            accessGroup = try container.decode(String.self, forKey: .accessGroup)
            name = try container.decodeIfPresent(String.self, forKey: .name)
            restored = try container.decode(Bool.self, forKey: .restored)
            reason = try container.decodeIfPresent(Reason.self, forKey: .reason)
            waitingForApp = try container.decode(Bool.self, forKey: .waitingForApp)
        }
    }

    public enum Reason: String, Codable, Sendable, CaseIterable {
        /// ThisDeviceOnly: wrapped with the source device's hardware UID.
        case deviceBound
        /// From an unencrypted archive, whose items only the source device opens.
        case unencryptedOnAnotherDevice
        /// Deleted on the target after the backup was made (a newer tombstone).
        case newerTombstone
        /// The target's synchronizable copy is newer.
        case newerOnDevice
        /// The item does not open on the device that made it: damaged or altered.
        case damaged
        /// From an iOS backup, under a class key tied to the phone that made it: not even its
        /// attributes can be read elsewhere.
        case sealedToSourceDevice
        /// From an iOS backup, sealed in a way Keyferry does not read (another version, an
        /// unknown class, attributes without an access group).
        case unsupported
        /// In Keyferry's own access group (`com.keyferry.*`), which holds the device's identity:
        /// no backup writes there, whatever it claims.
        case reservedGroup
        /// Written, then read back before the restore committed, and it did not open: dropped
        /// rather than reported restored and unreadable for good.
        case doesNotReadBack
        /// A later item of the same backup has its primary key or UUID, and replaced it.
        case replacedInBackup
        /// From an iOS backup, an item of a kind a phone never puts in one (access control that
        /// asks for the user, a key on a token, an App Clip's or a system-bound item).
        case neverBackedUp

        public var sentence: String {
            switch self {
            case .deviceBound: "device-bound (ThisDeviceOnly): only the device that made the backup can open it"
            case .unencryptedOnAnotherDevice: "unencrypted archive on another device: its keychain items open only on the device that made it"
            case .newerTombstone: "deleted on this device after the backup was made"
            case .newerOnDevice: "this device has a newer copy"
            case .damaged: "does not open: damaged or altered"
            case .sealedToSourceDevice: "sealed to the iPhone that made the backup (ThisDeviceOnly): not even its attributes can be read here"
            case .unsupported: "sealed in a form Keyferry does not read"
            case .reservedGroup: "in Keyferry's own access group (com.keyferry.*), which only the device itself writes"
            case .neverBackedUp:
                "a kind of item a phone never puts in a backup (access control that asks for the user, a key on a token, an App Clip's or a system-bound item)"
            case .replacedInBackup: "a later item of the same backup has its primary key or UUID, and took its place"
            case .doesNotReadBack: "did not read back once written here (its attributes or secret do not open): dropped, not kept unreadable"
            }
        }
    }

    public var restoredCount: Int { items.filter(\.restored).count }
}
