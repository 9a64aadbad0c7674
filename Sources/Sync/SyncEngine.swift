import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// What one pass of `SyncEngine.sync()` did.
public struct SyncReport: Equatable, Sendable {
    /// Local writes sealed and pushed.
    public var pushed = 0
    /// Versions received that won and were written.
    public var applied = 0
    /// Versions received that lost to what this device holds, or that it already held.
    public var superseded = 0
    /// Envelopes refused, with their reasons; never applied.
    public var rejected: [String] = []
    /// Class A items received while locked: kept sealed until unlock.
    public var waitingForUnlock = 0
    /// Synchronizable ThisDeviceOnly items seen in the change feed: they stay here.
    public var skippedDeviceBound = 0
}

/// One member's side of sync: it seals the device's own writes of eligible items into
/// envelopes and pushes them, and pulls what other members wrote, keeping of each item the
/// version the merge rule prefers. See Protocol/sync.md.
public actor SyncEngine {
    /// A version this device holds: what it is, and the write that put it in the keychain.
    struct HeldVersion {
        var stamp: VersionStamp
        var changeSequence: Int64
    }

    let device: Device
    let identity: DeviceIdentity
    let transport: any RelayTransport
    private let wallClock: @Sendable () -> UInt64
    public private(set) var history: CircleHistory
    private var generations: [UInt32: CircleKeys] = [:]
    /// Halves of generations not yet whole: circle keys from shares, class keys as published.
    private var sharedCircleKeys: [UInt32: SymmetricKey] = [:]
    private var publishedClassKeys: [UInt32: [UInt8]] = [:]
    private var clock = HybridClock()
    private var held: [UUID: HeldVersion] = [:]
    /// The change feed is pushed up to here.
    private var pushedThrough: Int64 = 0
    private var cursors: [RelayStream: UInt64] = [:]
    /// Envelopes that could not be written yet (class A while locked), oldest first.
    private var waiting: [SealedEnvelope] = []

    public var circle: UUID { history.circle }

    private init(device: Device, identity: DeviceIdentity, history: CircleHistory, transport: any RelayTransport,
                 wallClock: @escaping @Sendable () -> UInt64) {
        self.device = device
        self.identity = identity
        self.history = history
        self.transport = transport
        self.wallClock = wallClock
    }

    /// Milliseconds since 1970 from the system clock.
    public static let systemWallClock: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }

    /// Creates a circle with this device as its only member, and publishes its membership and
    /// first key generation.
    public static func create(device: Device, identity: DeviceIdentity, name: String, transport: any RelayTransport,
                              wallClock: @escaping @Sendable () -> UInt64 = systemWallClock) async throws -> SyncEngine {
        let history = CircleHistory(creator: identity, name: name)
        let engine = SyncEngine(device: device, identity: identity, history: history, transport: transport, wallClock: wallClock)
        let keys = CircleKeys(circle: history.circle, epoch: history.epoch)
        try await transport.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership)
        try await transport.push([KeyRecord.classKeys(epoch: keys.epoch, wrapped: keys.wrappedClassKeys()).bytes,
                                  KeyRecord.share(CircleKeyShare(keys, to: identity.sealingKey.publicKey, from: identity.signingKey)).bytes],
                                 circle: history.circle, stream: .keys)
        await engine.hold(keys)
        return engine
    }

    /// Joins `circle`, once a member has vouched for this device (`vouch(for:)`): reads and
    /// verifies the membership, then opens this device's share of the current keys.
    public static func join(_ circle: UUID, device: Device, identity: DeviceIdentity, transport: any RelayTransport,
                            wallClock: @escaping @Sendable () -> UInt64 = systemWallClock) async throws -> SyncEngine {
        let entries = try await transport.pull(circle: circle, stream: .membership, after: 0, limit: 10_000)
        let history = try CircleHistory(verifying: entries.map { try MembershipEntry(bytes: $0.body) })
        guard history.isMember(identity.signingKey.publicKey) else {
            throw CircleError.invalid("no member has vouched for this device in circle \(circle)")
        }
        let engine = SyncEngine(device: device, identity: identity, history: history, transport: transport, wallClock: wallClock)
        await engine.setCursor(.membership, entries.last?.cursor ?? 0)
        try await engine.pullKeys()
        guard await engine.holdsCurrentKeys else {
            throw CircleError.invalid("the keys of circle \(circle) have not been shared with this device yet")
        }
        return engine
    }

    /// Vouches for `peer`: records its joining, signed by this member, and shares the current
    /// keys with it.
    public func vouch(for peer: PeerIdentity) async throws {
        try await pullMembership()
        let entry = MembershipEntry(.join, subject: peer, after: history, circle: circle, signer: identity.signingKey)
        try history.append(entry)
        try await transport.push([entry.bytes], circle: circle, stream: .membership)
        guard let keys = generations[history.epoch] else { throw CircleError.invalid("this member does not hold the current keys") }
        try await transport.push([KeyRecord.share(CircleKeyShare(keys, to: peer.sealing, from: identity.signingKey)).bytes],
                                 circle: circle, stream: .keys)
    }

    /// Pushes the device's own writes and pulls everyone else's until this member is current.
    public func sync() async throws -> SyncReport {
        var report = SyncReport()
        try await pullMembership()
        try await pullKeys()
        try await push(&report)
        try await pull(&report)
        return report
    }

    // MARK: Membership and keys

    private var holdsCurrentKeys: Bool { generations[history.epoch] != nil }

    private func hold(_ keys: CircleKeys) { generations[keys.epoch] = keys }

    private func setCursor(_ stream: RelayStream, _ cursor: UInt64) { cursors[stream] = cursor }

    private func pullMembership() async throws {
        let records = try await transport.pull(circle: circle, stream: .membership, after: cursors[.membership] ?? 0, limit: 10_000)
        for record in records {
            let entry = try MembershipEntry(bytes: record.body)
            // Entries this member wrote itself, or already read, come back too.
            if Int(entry.sequence) < history.entries.count { continue }
            try history.append(entry)
        }
        if let last = records.last { cursors[.membership] = last.cursor }
    }

    private func pullKeys() async throws {
        let records = try await transport.pull(circle: circle, stream: .keys, after: cursors[.keys] ?? 0, limit: 10_000)
        for record in records {
            switch try? KeyRecord(bytes: record.body) {
            case .classKeys(let epoch, let bytes)?: publishedClassKeys[epoch] = bytes
            case .share(let share)? where share.recipient == identity.sealingKey.publicKey:
                // A share from outside the circle, or forged, is ignored like any stranger's.
                if let key = try? share.open(with: identity.sealingKey, trusting: Set(history.members.keys)) { sharedCircleKeys[share.epoch] = key }
            default: continue
            }
        }
        for (epoch, key) in sharedCircleKeys where generations[epoch] == nil {
            guard let wrapped = publishedClassKeys[epoch] else { continue }
            generations[epoch] = try CircleKeys(circle: circle, epoch: epoch, circleKey: key, wrappedClassKeys: wrapped)
        }
        if let last = records.last { cursors[.keys] = last.cursor }
    }

    // MARK: Items

    private func push(_ report: inout SyncReport) async throws {
        guard let keys = generations[history.epoch] else { return }
        let changes = try device.deviceKeychain.changes(since: pushedThrough, includingData: true)
        var envelopes: [[UInt8]] = []
        var versions: [(UUID, HeldVersion)] = []
        for change in changes {
            switch SyncEligibility(change.record) {
            case .replicates: break
            case .deviceBound: report.skippedDeviceBound += 1; continue
            case .notSynchronizable, .accessControlled: continue
            }
            // The engine's own writes of what others sent come back in the feed.
            if held[change.record.uuid]?.changeSequence == change.changeSequence { continue }
            var record = change.record
            if change.isTombstone { record.data = nil }
            let item = SyncedItem(version: clock.tick(wallMilliseconds: wallClock()), isTombstone: change.isTombstone, record: record)
            envelopes.append(try SealedEnvelope.seal(item, keys: keys, author: identity.signingKey).bytes)
            versions.append((record.uuid, HeldVersion(stamp: item.stamp, changeSequence: change.changeSequence)))
        }
        if !envelopes.isEmpty { try await transport.push(envelopes, circle: circle, stream: .envelopes) }
        for (uuid, version) in versions { held[uuid] = version }
        if let last = changes.last { pushedThrough = last.changeSequence }
        report.pushed += envelopes.count
    }

    private func pull(_ report: inout SyncReport) async throws {
        let retry = waiting
        waiting = []
        for envelope in retry { apply(envelope, &report) }
        while true {
            let records = try await transport.pull(circle: circle, stream: .envelopes, after: cursors[.envelopes] ?? 0, limit: 1_000)
            guard let last = records.last else { break }
            for record in records {
                do {
                    let envelope = try SealedEnvelope(bytes: record.body)
                    if envelope.header.author == identity.signingKey.publicKey { continue }
                    apply(envelope, &report)
                } catch {
                    report.rejected.append("\(error)")
                }
            }
            cursors[.envelopes] = last.cursor
        }
    }

    private func apply(_ envelope: SealedEnvelope, _ report: inout SyncReport) {
        let item: SyncedItem
        do {
            guard let keys = generations[envelope.header.epoch] else {
                throw EnvelopeError.cannotDecrypt("item \(envelope.header.item) is sealed under key generation \(envelope.header.epoch), which this member does not hold")
            }
            item = try envelope.open(with: keys, members: Set(history.members.keys))
        } catch {
            report.rejected.append("\(error)")
            return
        }
        clock.observe(item.version)
        let uuid = item.record.uuid
        let stamp = item.stamp
        if let current = held[uuid], !MergeRule.prefers(stamp, over: current.stamp) {
            report.superseded += 1
            return
        }
        do {
            let keychain = device.deviceKeychain
            // Two items added apart under one primary key: the preferred one stays everywhere.
            if let holder = try keychain.primaryKeyHolder(of: item.record), holder != uuid {
                if let other = held[holder], !MergeRule.prefers(stamp, over: other.stamp) {
                    report.superseded += 1
                    return
                }
                held[holder] = nil
            }
            let tombstoneDate = item.isTombstone ? Date(timeIntervalSince1970: Double(item.version.milliseconds) / 1000) : nil
            let sequence = try keychain.applyReplicated(item.record, tombstoneDate: tombstoneDate)
            held[uuid] = HeldVersion(stamp: stamp, changeSequence: sequence)
            report.applied += 1
        } catch let error as KeychainError where error.status == .interactionNotAllowed {
            waiting.append(envelope)
            report.waitingForUnlock += 1
        } catch {
            report.rejected.append("item \(uuid): \(error)")
        }
    }
}
