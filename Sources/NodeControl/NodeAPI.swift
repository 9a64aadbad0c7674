public import Foundation
public import KeychainModel

/// The control API a node serves on `DIR/node.sock`: JSON over HTTP/1.1, one POST per
/// operation (GET for reads without a body). Every failure is a `NodeAPI.Failure` body with a
/// non-2xx status. The command line is one client; anything that speaks HTTP over a Unix
/// socket (curl `--unix-socket`) is another.
public enum NodeAPI {
    public static let version = "v1"

    /// A route of the control API, typed by what it takes and what it answers: the client and
    /// the server name the same constant, so a call with the wrong body or answer does not
    /// compile. The routes are below; those that answer with an engine's values (a backup's
    /// manifest, a restore report, the survival matrix) are declared where those values are
    /// (`Node`).
    public struct Route<Body: Codable & Sendable, Answer: Codable & Sendable>: Sendable {
        /// Under `/v1/`.
        public let path: String
        /// A read without a body (`GET`); every other route is a `POST` with a JSON body.
        public let isGet: Bool
        /// Long work that stops when its caller goes away (Ctrl-C, a timeout). The node watches
        /// the connection's inbound side for that, so the connection serves this one call.
        public let cancelledWhenCallerLeaves: Bool

        package init(_ path: String, get: Bool = false, cancelledWhenCallerLeaves: Bool = false) {
            self.path = path
            isGet = get
            self.cancelledWhenCallerLeaves = cancelledWhenCallerLeaves
        }
    }

    // MARK: Device

    /// What `GET /v1/status` answers: the device plus the process serving it.
    public struct NodeStatus: Codable, Sendable {
        public var pid: Int32
        public var device: DeviceStatus
        /// While a backup is being written: items and files done, and their total.
        public var backupProgress: Progress?

        package init(pid: Int32, device: DeviceStatus, backupProgress: Progress? = nil) {
            self.pid = pid
            self.device = device
            self.backupProgress = backupProgress
        }
    }

    public struct Progress: Codable, Sendable {
        public var done: Int
        public var total: Int
        /// Work before the first item, when there is some: deriving an iOS backup's password key.
        public var stage: String?

        package init(done: Int, total: Int, stage: String? = nil) {
            self.done = done
            self.total = total
            self.stage = stage
        }
    }

    public struct Unlock: Codable, Sendable {
        public var passcode: String?
        public init(passcode: String?) { self.passcode = passcode }
    }

    public struct Lock: Codable, Sendable {
        public var immediately: Bool
        public init(immediately: Bool) { self.immediately = immediately }
    }

    /// Set (or change, with `current`) or remove the passcode.
    public struct Passcode: Codable, Sendable {
        public var new: String?
        public var current: String?
        public var remove: Bool
        public init(new: String?, current: String?, remove: Bool) {
            self.new = new
            self.current = current
            self.remove = remove
        }
    }

    public enum BiometryAction: String, Codable, Sendable, CaseIterable {
        case enroll, change, remove
    }

    public struct Biometry: Codable, Sendable {
        public var action: BiometryAction
        public init(action: BiometryAction) { self.action = action }
    }

    /// Stolen Device Protection: a new setting, where the device is now, or both (nil: as it is).
    public struct Security: Codable, Sendable {
        public var stolenDeviceProtection: StolenDeviceProtection?
        public var away: Bool?
        public init(stolenDeviceProtection: StolenDeviceProtection? = nil, away: Bool? = nil) {
            self.stolenDeviceProtection = stolenDeviceProtection
            self.away = away
        }
    }

    // MARK: Apps

    public struct Uninstall: Codable, Sendable {
        public var bundleID: String
        public init(bundleID: String) { self.bundleID = bundleID }
    }

    /// UserDefaults of one app: set string values, then answer the whole dictionary
    /// (strings only; other property-list values are shown by their description).
    /// `group`, in these requests: the app group's shared container the app reaches, rather
    /// than the app's own sandbox.
    public struct Defaults: Codable, Sendable {
        public var bundleID: String
        public var set: [String: String]
        public var group: String?
        public init(bundleID: String, set: [String: String] = [:], group: String? = nil) {
            self.bundleID = bundleID
            self.set = set
            self.group = group
        }
    }

    /// The files under an app's Documents.
    public struct Files: Codable, Sendable {
        public var bundleID: String
        public var group: String?
        public init(bundleID: String, group: String? = nil) {
            self.bundleID = bundleID
            self.group = group
        }
    }

    public struct FileInfo: Codable, Sendable, Equatable {
        public var path: String
        public var protection: FileProtection
        public var bytes: Int

        package init(path: String, protection: FileProtection, bytes: Int) {
            self.path = path
            self.protection = protection
            self.bytes = bytes
        }
    }

    /// One file under an app's Documents (`path` relative to it): written when `contents` is
    /// given (with `protection`, by default complete until first user authentication), removed
    /// when `remove` is true, else read. The answer is the file as it now is; `contents` is
    /// nil after a removal.
    /// An app's UserDefaults as property-list values, for app code (`KeyferryContext.userDefaults`):
    /// entries to set and keys to remove, then every entry back.
    public struct DefaultsPlist: Codable, Sendable {
        public var bundleID: String
        /// A binary property list of the entries to set.
        public var set: Data?
        public var remove: [String]
        public var group: String?
        public init(bundleID: String, set: Data? = nil, remove: [String] = [], group: String? = nil) {
            self.bundleID = bundleID
            self.set = set
            self.remove = remove
            self.group = group
        }
    }

    /// Every UserDefaults entry as a binary property list; nil while they cannot be read
    /// (before first unlock).
    public struct DefaultsPlistContents: Codable, Sendable {
        public var plist: Data?
        package init(plist: Data?) { self.plist = plist }
    }

    public struct File: Codable, Sendable {
        /// What one request writes at most: its JSON (base64) stays under a node's body limit.
        public static let maximumBytes = 4 << 20

        public var bundleID: String
        public var path: String
        public var contents: Data?
        public var protection: FileProtection?
        public var remove: Bool?
        public var group: String?

        public init(
            bundleID: String, path: String, contents: Data? = nil, protection: FileProtection? = nil, remove: Bool = false, group: String? = nil
        ) {
            self.bundleID = bundleID
            self.path = path
            self.contents = contents
            self.protection = protection
            self.remove = remove ? true : nil
            self.group = group
        }
    }

    public struct FileContents: Codable, Sendable {
        public var path: String
        public var contents: Data?

        package init(path: String, contents: Data? = nil) {
            self.path = path
            self.contents = contents
        }
    }

    // MARK: Items

    public struct Add: Codable, Sendable {
        public var app: String
        public var item: NewItem
        /// With a certificate as `item`, its private key: the two are added as one identity.
        public var privateKey: NewItem?
        public init(app: String, item: NewItem, privateKey: NewItem? = nil) {
            self.app = app
            self.item = item
            self.privateKey = privateKey
        }
    }

    public struct Search: Codable, Sendable {
        public var app: String
        public var query: ItemQuery
        public init(app: String, query: ItemQuery) {
            self.app = app
            self.query = query
        }
    }

    /// Many searches of one app in one call: what a batch client sends instead of a `copy`
    /// per item. Each query is answered on its own, in order; one failing fails only itself.
    public struct SearchMany: Codable, Sendable {
        public var app: String
        public var queries: [ItemQuery]
        public init(app: String, queries: [ItemQuery]) {
            self.app = app
            self.queries = queries
        }
    }

    /// One answer of `copy-many`: the items found, or why not.
    public struct Found: Codable, Sendable {
        public var items: [ItemRecord]?
        public var failure: Failure?

        package init(items: [ItemRecord]?, failure: Failure?) {
            self.items = items
            self.failure = failure
        }

        /// The items, or the typed error, on the client side.
        public func get() throws -> [ItemRecord] {
            if let failure { throw failure.error }
            return items ?? []
        }
    }

    public struct FoundMany: Codable, Sendable {
        public var results: [Found]

        package init(results: [Found]) {
            self.results = results
        }
    }

    public struct Update: Codable, Sendable {
        public var app: String
        public var query: ItemQuery
        public var changes: ItemChanges
        public init(app: String, query: ItemQuery, changes: ItemChanges) {
            self.app = app
            self.query = query
            self.changes = changes
        }
    }

    /// Every live item's attributes (never data), of one app or, with no app, of the whole
    /// device.
    public struct List: Codable, Sendable {
        public var app: String?
        public init(app: String?) { self.app = app }
    }

    public struct Items: Codable, Sendable {
        public var items: [ItemRecord]
        /// Matching items passed over because their rows fail authentication.
        public var damaged: [DamagedItem]

        package init(items: [ItemRecord], damaged: [DamagedItem] = []) {
            self.items = items
            self.damaged = damaged
        }
    }

    // MARK: Backup

    /// Write a backup archive of this device to `path` (absolute); the answer is its manifest.
    public struct Backup: Codable, Sendable {
        public var path: String
        /// nil: an unencrypted archive.
        public var password: String?
        public init(path: String, password: String?) {
            self.path = path
            self.password = password
        }
    }

    /// Write this device as an iOS backup folder at `path` (absolute, new); the answer is a
    /// `PhoneBackupWriter.Summary`.
    public struct PhoneBackup: Codable, Sendable {
        public var path: String
        /// nil: an unencrypted backup.
        public var password: String?
        /// PBKDF2-SHA256 rounds of the keybag; nil for a phone's 10,000,000.
        public var rounds: UInt32?
        public init(path: String, password: String?, rounds: UInt32?) {
            self.path = path
            self.password = password
            self.rounds = rounds
        }
    }

    /// Quick Start onto the powered-off device at `target` (absolute); the answer is the
    /// restore report of what came across.
    public struct Transfer: Codable, Sendable {
        public var target: String
        /// The target's passcode, when it has one.
        public var passcode: String?
        public init(target: String, passcode: String?) {
            self.target = target
            self.passcode = passcode
        }
    }

    // MARK: Survival and time

    /// The survival matrix of this device; the answer is a `SurvivalMatrix`.
    public struct SurvivalOptions: Codable, Sendable {
        public var app: String?
        /// This device's passcode, if the caller knows it: it answers prompts on the way.
        public var passcode: String?
        public init(app: String?, passcode: String?) {
            self.app = app
            self.passcode = passcode
        }
    }

    /// Moves the device's clock forward by `advance` seconds (zero only reads it).
    public struct Clock: Codable, Sendable {
        public var advance: TimeInterval
        public init(advance: TimeInterval) { self.advance = advance }
    }

    /// The device's time, and how far it runs ahead of real time.
    public struct ClockState: Codable, Sendable {
        public var now: Date
        public var advanced: TimeInterval
        public init(now: Date, advanced: TimeInterval) {
            self.now = now
            self.advanced = advanced
        }
    }

    public struct Empty: Codable, Sendable {
        public init() {}
    }

    /// `sync/now`: how long the node keeps asking a relay it cannot reach before it gives up;
    /// none, one pass.
    public struct SyncNow: Codable, Sendable {
        /// In seconds.
        public var timeout: Double?

        public init(timeout: Duration? = nil) {
            self.timeout = timeout.map { $0 / .seconds(1) }
        }
    }

    /// How many items an update or a delete touched.
    public struct Changed: Codable, Sendable {
        public var count: Int
        public init(count: Int) { self.count = count }
    }

    // MARK: Circle and sync

    /// Create a circle with this device as its first member, through the relay at `relay`.
    public struct CircleCreate: Codable, Sendable {
        public var relay: String
        /// How the other members see this device; the device's name when nil.
        public var name: String?
        /// The relay operator's admission token, for a relay that creates circles only for
        /// holders of one (`relay serve --admission token FILE`).
        public var admissionToken: String?
        public init(relay: String, name: String?, admissionToken: String? = nil) {
            self.relay = relay
            self.name = name
            self.admissionToken = admissionToken
        }
    }

    /// A device's public identity, keys in hex: what a sponsor vouches for.
    public struct Peer: Codable, Sendable, Equatable {
        public var name: String
        public var signingKey: String
        public var encryptionKey: String
        public var isThisDevice: Bool?

        package init(name: String, signingKey: String, encryptionKey: String, isThisDevice: Bool? = nil) {
            self.name = name
            self.signingKey = signingKey
            self.encryptionKey = encryptionKey
            self.isThisDevice = isThisDevice
        }
    }

    /// Ask a member to vouch for `peer`; the answer says which circle to join, and where.
    public struct Vouch: Codable, Sendable {
        public var peer: Peer
        public init(peer: Peer) { self.peer = peer }
    }

    /// What the sponsor answers and the joiner takes (`circle/join`): the voucher, signed by the
    /// sponsor (Protocol/sync.md, "Vouchers"), with the circle and relay it names. To the joiner,
    /// `relay` is the relay to sync through: the voucher's, or another serving the same database.
    public struct Voucher: Codable, Sendable {
        public var circle: UUID
        public var relay: String
        /// The signed voucher's bytes, as `circle vouch --out` writes them to a file.
        public var voucher: Data
        /// The share of a 0.1.0 client's voucher, which no sponsor signed: read only to refuse it.
        package var unsignedShare: Data?

        public init(circle: UUID, relay: String, voucher: Data) {
            self.circle = circle
            self.relay = relay
            self.voucher = voucher
        }

        private enum CodingKeys: String, CodingKey { case circle, relay, voucher, share }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            circle = try container.decode(UUID.self, forKey: .circle)
            relay = try container.decode(String.self, forKey: .relay)
            unsignedShare = try container.decodeIfPresent(Data.self, forKey: .share)
            voucher = try unsignedShare == nil ? container.decode(Data.self, forKey: .voucher) : Data()
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(circle, forKey: .circle)
            try container.encode(relay, forKey: .relay)
            try container.encode(voucher, forKey: .voucher)
        }
    }

    /// Ask, through the relay alone, to join a circle: a member approves with the code.
    public struct CircleRequest: Codable, Sendable {
        public var relay: String
        public var circle: UUID
        /// How the other members see this device; the device's name when nil.
        public var name: String?
        /// How long the request waits for an answer, in seconds: 600 when nil, at most 3,600.
        public var lifetime: Double?

        public init(relay: String, circle: UUID, name: String? = nil, lifetime: Double? = nil) {
            self.relay = relay
            self.circle = circle
            self.name = name
            self.lifetime = lifetime
        }
    }

    /// This device's request to join, and where it stands: `joined` once a member's voucher was
    /// checked and the device published its entry; nil while it waits.
    public struct CircleRequested: Codable, Sendable {
        public var circle: UUID
        public var relay: String
        public var name: String
        /// The six digits the members compare before approving, as `123 456`.
        public var code: String
        /// When the request stops waiting, by the device's clock.
        public var expires: Date
        public var joined: CircleStatus?

        package init(circle: UUID, relay: String, name: String, code: String, expires: Date, joined: CircleStatus? = nil) {
            self.circle = circle
            self.relay = relay
            self.name = name
            self.code = code
            self.expires = expires
            self.joined = joined
        }
    }

    /// A device's pending request to join, as a member sees it.
    public struct PendingJoin: Codable, Sendable {
        public var name: String
        public var signingKey: String
        public var encryptionKey: String
        /// The code the asking device shows, as `123 456`.
        public var code: String
        public var made: Date
        public var expires: Date

        package init(name: String, signingKey: String, encryptionKey: String, code: String, made: Date, expires: Date) {
            self.name = name
            self.signingKey = signingKey
            self.encryptionKey = encryptionKey
            self.code = code
            self.made = made
            self.expires = expires
        }
    }

    public struct PendingJoins: Codable, Sendable {
        public var requests: [PendingJoin]
        public init(requests: [PendingJoin]) { self.requests = requests }
    }

    /// Approve or decline the pending request whose device shows `code` (six digits; spaces
    /// and dashes allowed).
    public struct CircleAnswer: Codable, Sendable {
        public var code: String
        public init(code: String) { self.code = code }
    }

    /// Remove the member of this name; the remaining members get new keys.
    public struct CircleRemove: Codable, Sendable {
        public var peer: String
        public init(peer: String) { self.peer = peer }
    }

    /// Leave the circle; with `force`, forget it even when the relay cannot be reached.
    public struct CircleLeave: Codable, Sendable {
        public var force: Bool
        public init(force: Bool) { self.force = force }
    }

    public struct CircleStatus: Codable, Sendable {
        /// nil when this device is in no circle.
        public var circle: UUID?
        /// The membership this device has read no longer counts it: `circle leave` forgets the circle.
        public var removed: Bool?
        /// Before first unlock the device's sync identity is sealed: it syncs once unlocked.
        public var sealedUntilUnlock: Bool?
        public var relay: String?
        public var name: String?
        /// The key generation: 1, plus one per removal.
        public var epoch: UInt32?
        public var members: [Peer]
        /// Read from the device at rest, no node running: the membership as it last read it.
        public var poweredOff: Bool?

        package init(
            circle: UUID? = nil, removed: Bool? = nil, sealedUntilUnlock: Bool? = nil, relay: String? = nil, name: String? = nil, epoch: UInt32? = nil,
            members: [Peer], poweredOff: Bool? = nil
        ) {
            self.poweredOff = poweredOff
            self.circle = circle
            self.removed = removed
            self.sealedUntilUnlock = sealedUntilUnlock
            self.relay = relay
            self.name = name
            self.epoch = epoch
            self.members = members
        }
    }

    public struct SyncStatus: Codable, Sendable {
        public var circle: UUID?
        /// Before first unlock the device's sync identity is sealed: it syncs once unlocked.
        public var sealedUntilUnlock: Bool?
        public var members: [Peer]
        /// When the last exchange with the relay completed since the node started, and what it did.
        public var lastExchange: Date?
        /// When an exchange last moved something (what the member remembers was written), from
        /// this run or one before: after a restart, the state it picks up from.
        public var lastChange: Date?
        public var lastReport: SyncReport?
        /// Why the last attempt failed (the relay down, say), if it did; retried with backoff.
        public var lastError: String?
        /// Eligible local writes not pushed yet (0 while powered off: counted by a running node).
        public var pending: Int
        /// Read from the device at rest, no node running: no exchange, and nothing pending
        /// counted, until a node starts.
        public var poweredOff: Bool?
        /// Items received while locked, applied at unlock.
        public var waitingForUnlock: Int
        /// Synchronizable ThisDeviceOnly items: skipped, device-bound, named account @ service.
        public var skippedDeviceBound: [String]
        /// What arrived of each other member's batches. Missing ones were withheld from this
        /// device (or lost); two devices that show different heads for one author see
        /// different logs.
        public var received: [Received]

        public struct Received: Codable, Sendable {
            /// Nil when the author is no longer a member.
            public var name: String?
            public var signingKey: String
            /// The author's last batch received: its sequence and BLAKE2b-256 digest.
            public var head: UInt64
            public var headDigest: String
            /// Sequences below the head that never arrived, as `5` or `5-7`.
            public var missing: [String]

            package init(name: String? = nil, signingKey: String, head: UInt64, headDigest: String, missing: [String]) {
                self.name = name
                self.signingKey = signingKey
                self.head = head
                self.headDigest = headDigest
                self.missing = missing
            }
        }

        package init(
            circle: UUID? = nil, sealedUntilUnlock: Bool? = nil, members: [Peer], lastExchange: Date? = nil, lastChange: Date? = nil,
            lastReport: SyncReport? = nil,
            lastError: String? = nil, pending: Int, waitingForUnlock: Int, skippedDeviceBound: [String], received: [Received],
            poweredOff: Bool? = nil
        ) {
            self.poweredOff = poweredOff
            self.circle = circle
            self.sealedUntilUnlock = sealedUntilUnlock
            self.members = members
            self.lastExchange = lastExchange
            self.lastChange = lastChange
            self.lastReport = lastReport
            self.lastError = lastError
            self.pending = pending
            self.waitingForUnlock = waitingForUnlock
            self.skippedDeviceBound = skippedDeviceBound
            self.received = received
        }
    }

    // MARK: Failures

    /// Why a call failed, carried so that the client throws the very error the node threw. Any
    /// `CodedError` goes over the wire as its domain, code, kind, sentence and retryability,
    /// which any client can read, and as itself (`detail`), which this client decodes for the
    /// types it knows (`knownErrors`); a domain it does not know stays a `RemoteError` with the
    /// same domain, code and kind.
    public struct Failure: Codable, Sendable {
        public let error: any CodedError

        package init(_ error: any CodedError) { self.error = error }

        /// The error types a client rebuilds from their domain.
        static let knownErrors: [any CodedError.Type] = [
            KeychainError.self, DeviceError.self, ArchiveError.self, CircleError.self, RelayError.self, NodeError.self,
        ]

        private enum CodingKeys: String, CodingKey { case domain, code, kind, message, retryable, detail }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let domain = try container.decode(String.self, forKey: .domain)
            if let type = Self.knownErrors.first(where: { $0.domain == domain }), let error = try? container.decode(type, forKey: .detail) {
                self.error = error
                return
            }
            // Only the sentence is required, so that a node of another version is still understood.
            error = RemoteError(
                domain: domain, code: (try? container.decode(String.self, forKey: .code)) ?? "",
                kind: (try? container.decode(ProblemKind.self, forKey: .kind)) ?? .failure,
                message: try container.decode(String.self, forKey: .message), isRetryable: (try? container.decode(Bool.self, forKey: .retryable)) ?? false)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(error.domain, forKey: .domain)
            try container.encode(error.codeName, forKey: .code)
            try container.encode(error.kind, forKey: .kind)
            try container.encode(error.message, forKey: .message)
            try container.encode(error.isRetryable, forKey: .retryable)
            try error.encode(into: &container, forKey: .detail)
        }
    }

    package static let encoder = JSONEncoder()
    package static let decoder = JSONDecoder()
}

extension CodedError {
    /// The error itself under `key`: a method, so that an `any CodedError` encodes as its type.
    fileprivate func encode<Key: CodingKey>(into container: inout KeyedEncodingContainer<Key>, forKey key: Key) throws {
        try container.encode(self, forKey: key)
    }
}

// MARK: Routes

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.NodeStatus {
    public static var status: Self { Self("status", get: true) }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.Empty {
    public static var reboot: Self { Self("reboot") }
}

extension NodeAPI.Route where Body == NodeAPI.Unlock, Answer == NodeAPI.Empty {
    public static var unlock: Self { Self("unlock") }
}

extension NodeAPI.Route where Body == NodeAPI.Lock, Answer == NodeAPI.Empty {
    public static var lock: Self { Self("lock") }
}

extension NodeAPI.Route where Body == NodeAPI.Security, Answer == NodeAPI.Empty {
    public static var security: Self { Self("security") }
}

extension NodeAPI.Route where Body == NodeAPI.Passcode, Answer == NodeAPI.Empty {
    public static var passcode: Self { Self("passcode") }
}

extension NodeAPI.Route where Body == NodeAPI.Biometry, Answer == NodeAPI.Empty {
    public static var biometry: Self { Self("biometry") }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == [AppManifest] {
    public static var apps: Self { Self("apps", get: true) }
}

extension NodeAPI.Route where Body == AppManifest, Answer == NodeAPI.Empty {
    public static var install: Self { Self("install") }
}

extension NodeAPI.Route where Body == NodeAPI.Uninstall, Answer == NodeAPI.Empty {
    public static var uninstall: Self { Self("uninstall") }
}

extension NodeAPI.Route where Body == NodeAPI.Defaults, Answer == [String: String] {
    public static var defaults: Self { Self("defaults") }
}

extension NodeAPI.Route where Body == NodeAPI.DefaultsPlist, Answer == NodeAPI.DefaultsPlistContents {
    public static var defaultsPlist: Self { Self("defaults/plist") }
}

extension NodeAPI.Route where Body == NodeAPI.Files, Answer == [NodeAPI.FileInfo] {
    public static var files: Self { Self("files") }
}

extension NodeAPI.Route where Body == NodeAPI.File, Answer == NodeAPI.FileContents {
    public static var file: Self { Self("file") }
}

extension NodeAPI.Route where Body == NodeAPI.Add, Answer == NodeAPI.Items {
    public static var add: Self { Self("add") }
}

extension NodeAPI.Route where Body == NodeAPI.Search, Answer == NodeAPI.Items {
    public static var copy: Self { Self("copy") }
}

extension NodeAPI.Route where Body == NodeAPI.SearchMany, Answer == NodeAPI.FoundMany {
    public static var copyMany: Self { Self("copy-many") }
}

extension NodeAPI.Route where Body == NodeAPI.Update, Answer == NodeAPI.Changed {
    public static var update: Self { Self("update") }
}

extension NodeAPI.Route where Body == NodeAPI.Search, Answer == NodeAPI.Changed {
    public static var delete: Self { Self("delete") }
}

extension NodeAPI.Route where Body == NodeAPI.List, Answer == ItemListing {
    public static var list: Self { Self("list") }
}

extension NodeAPI.Route where Body == NodeAPI.Transfer, Answer == RestoreReport {
    public static var transfer: Self { Self("transfer", cancelledWhenCallerLeaves: true) }
}

extension NodeAPI.Route where Body == NodeAPI.Clock, Answer == NodeAPI.ClockState {
    public static var clock: Self { Self("clock") }
}

extension NodeAPI.Route where Body == NodeAPI.CircleCreate, Answer == NodeAPI.CircleStatus {
    public static var circleCreate: Self { Self("circle/create") }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.Peer {
    public static var circleIdentity: Self { Self("circle/identity", get: true) }
}

extension NodeAPI.Route where Body == NodeAPI.Vouch, Answer == NodeAPI.Voucher {
    public static var circleVouch: Self { Self("circle/vouch") }
}

extension NodeAPI.Route where Body == NodeAPI.Voucher, Answer == NodeAPI.CircleStatus {
    public static var circleJoin: Self { Self("circle/join") }
}

extension NodeAPI.Route where Body == NodeAPI.CircleRequest, Answer == NodeAPI.CircleRequested {
    public static var circleRequest: Self { Self("circle/request") }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.CircleRequested {
    public static var circleRequestAnswer: Self { Self("circle/request/answer") }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.PendingJoins {
    public static var circleRequests: Self { Self("circle/requests", get: true) }
}

extension NodeAPI.Route where Body == NodeAPI.CircleAnswer, Answer == NodeAPI.PendingJoin {
    public static var circleApprove: Self { Self("circle/approve") }
}

extension NodeAPI.Route where Body == NodeAPI.CircleAnswer, Answer == NodeAPI.PendingJoins {
    public static var circleDecline: Self { Self("circle/decline") }
}

extension NodeAPI.Route where Body == NodeAPI.CircleRemove, Answer == NodeAPI.CircleStatus {
    public static var circleRemove: Self { Self("circle/remove") }
}

extension NodeAPI.Route where Body == NodeAPI.CircleLeave, Answer == NodeAPI.CircleStatus {
    public static var circleLeave: Self { Self("circle/leave") }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.CircleStatus {
    public static var circleStatus: Self { Self("circle/status", get: true) }
}

extension NodeAPI.Route where Body == NodeAPI.SyncNow, Answer == SyncReport {
    /// Its caller leaving (a Ctrl-C) ends the node's wait for the relay.
    public static var syncNow: Self { Self("sync/now", cancelledWhenCallerLeaves: true) }
}

extension NodeAPI.Route where Body == NodeAPI.Empty, Answer == NodeAPI.SyncStatus {
    public static var syncStatus: Self { Self("sync/status", get: true) }
}
