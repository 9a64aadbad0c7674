import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// What one pass of `SyncEngine.sync()` did.
public struct SyncReport: Equatable, Sendable, Codable {
    /// Local writes sealed and pushed.
    public var pushed = 0
    /// Versions received that won and were written.
    public var applied = 0
    /// Versions received that lost to what this device holds, or that it already held.
    public var superseded = 0
    /// Envelopes refused, one by one or a whole batch at once, with their reasons; never applied.
    public var rejected: [String] = []
    /// Class A items received while locked: kept sealed until unlock.
    public var waitingForUnlock = 0
    /// Synchronizable ThisDeviceOnly items seen in the change feed: they stay here.
    public var skippedDeviceBound = 0
}

/// One member's side of sync: it seals the device's own writes of eligible items into
/// envelopes and pushes them, and pulls what other members wrote, keeping of each item the
/// version the merge rule prefers. Its secrets live in the device's keychain and the rest in
/// `sync.json` beside it, saved after every operation. See Protocol/sync.md.
public actor SyncEngine {
    /// A version this device holds: what it is, and the write that put it in the keychain.
    struct HeldVersion {
        var stamp: VersionStamp
        var changeSequence: Int64
    }

    let device: Device
    let identity: DeviceIdentity
    let transport: any RelayTransport
    public let relay: URL
    public let name: String
    private let wallClock: @Sendable () -> UInt64
    public private(set) var history: CircleHistory
    private var generations: [UInt32: CircleKeys] = [:]
    private var publishedClassKeys: [UInt32: [UInt8]] = [:]
    private var clock = HybridClock()
    private var held: [UUID: HeldVersion] = [:]
    /// The change feed is pushed up to here.
    private var pushedThrough: Int64 = 0
    private var cursors: [RelayStream: UInt64] = [:]
    /// Envelopes that could not be written yet (class A while locked), oldest first.
    private var waiting: [SealedEnvelope] = []

    public var circle: UUID { history.circle }
    public var epoch: UInt32 { history.epoch }
    /// The members, this device among them, by name.
    public var members: [PeerIdentity] { history.members.values.sorted { $0.name < $1.name } }
    public var signingKey: SigningPublicKey { identity.signingKey.publicKey }
    /// Items received while locked, waiting for unlock.
    public var waitingCount: Int { waiting.count }

    /// What `sync status` lists: eligible local writes not pushed yet, and the synchronizable
    /// items that stay here because they are ThisDeviceOnly (named account @ service).
    public func localStatus() throws -> (pending: Int, deviceBound: [String]) {
        var pending = 0
        var deviceBound: [String] = []
        for change in try device.deviceKeychain.changes(since: 0) {
            switch SyncEligibility(change.record) {
            case .replicates:
                if change.changeSequence > pushedThrough, held[change.record.uuid]?.changeSequence != change.changeSequence { pending += 1 }
            case .deviceBound where !change.isTombstone:
                let text = { (key: AttributeKey) -> String? in
                    if case .string(let s)? = change.record.attributes[key], !s.isEmpty { s } else { nil }
                }
                deviceBound.append([text(.account), text(.service) ?? text(.server)].compactMap { $0 }.joined(separator: " @ "))
            default: continue
            }
        }
        return (pending, deviceBound.sorted())
    }

    /// Milliseconds since 1970 from the system clock.
    public static let systemWallClock: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }

    private init(device: Device, name: String, history: CircleHistory, relay: URL, transport: any RelayTransport,
                 wallClock: @escaping @Sendable () -> UInt64) throws {
        self.device = device
        identity = try SyncSecrets.identity(of: device)
        self.name = name
        self.history = history
        self.relay = relay
        self.transport = transport
        self.wallClock = wallClock
    }

    /// How a device appears to the members who vouch for it. Makes its identity on first use.
    public static func peerIdentity(of device: Device, name: String) throws -> PeerIdentity {
        try SyncSecrets.identity(of: device).peer(named: name)
    }

    /// Creates a circle with this device as its only member, and publishes its membership and
    /// first key generation.
    public static func create(device: Device, name: String, relay: URL, transport: any RelayTransport,
                              wallClock: @escaping @Sendable () -> UInt64 = systemWallClock) async throws -> SyncEngine {
        guard try SyncState.load(from: device.directory) == nil else {
            throw CircleError.invalid("\(device.info.name) is already in a circle; `circle status` shows which.")
        }
        let identity = try SyncSecrets.identity(of: device)
        let history = CircleHistory(creator: identity, name: name)
        let engine = try SyncEngine(device: device, name: name, history: history, relay: relay, transport: transport, wallClock: wallClock)
        let keys = CircleKeys(circle: history.circle, epoch: history.epoch)
        let wrapped = keys.wrappedClassKeys()
        try await transport.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership)
        try await transport.push([KeyRecord.classKeys(epoch: keys.epoch, wrapped: wrapped).bytes,
                                  KeyRecord.share(CircleKeyShare(keys, to: identity.sealingKey.publicKey, from: identity.signingKey)).bytes],
                                 circle: history.circle, stream: .keys)
        try SyncSecrets.storeCircleKey(keys.circleKey, device, circle: keys.circle, epoch: keys.epoch)
        try await engine.adopt(keys, wrapped: wrapped)
        return engine
    }

    /// Joins `circle`, once a member has vouched for this device (`vouch(for:)`): reads and
    /// verifies the membership, then opens this device's share of the current keys.
    public static func join(_ circle: UUID, device: Device, name: String, relay: URL, transport: any RelayTransport,
                            wallClock: @escaping @Sendable () -> UInt64 = systemWallClock) async throws -> SyncEngine {
        guard try SyncState.load(from: device.directory) == nil else {
            throw CircleError.invalid("\(device.info.name) is already in a circle; `circle status` shows which.")
        }
        let entries = try await transport.pull(circle: circle, stream: .membership, after: 0, limit: 10_000)
        guard !entries.isEmpty else { throw CircleError.invalid("the relay at \(relay.absoluteString) knows no circle \(circle)") }
        let history = try CircleHistory.reading(entries.map { try MembershipEntry(bytes: $0.body) })
        let engine = try SyncEngine(device: device, name: name, history: history, relay: relay, transport: transport, wallClock: wallClock)
        try await engine.finishJoining(membershipCursor: entries.last!.cursor)
        return engine
    }

    /// The member whose state is in the device's directory; nil when it is in no circle.
    public static func open(device: Device, transport: (URL) -> any RelayTransport,
                            wallClock: @escaping @Sendable () -> UInt64 = systemWallClock) async throws -> SyncEngine? {
        guard let state = try SyncState.load(from: device.directory) else { return nil }
        let history = try CircleHistory(verifying: state.membership.map { try MembershipEntry(bytes: [UInt8]($0)) })
        let engine = try SyncEngine(device: device, name: state.name, history: history, relay: state.relay,
                                    transport: transport(state.relay), wallClock: wallClock)
        try await engine.restore(state)
        return engine
    }

    /// Vouches for `peer`: records its joining, signed by this member, and shares the current
    /// keys with it.
    public func vouch(for peer: PeerIdentity) async throws {
        try await pullMembership()
        guard !history.isMember(peer.signing) else { return }
        try await publish(MembershipEntry(.join, subject: peer, after: history, circle: circle, signer: identity.signingKey))
        guard let keys = generations[history.epoch] else { throw CircleError.invalid("this member does not hold the circle's current keys") }
        try await transport.push([KeyRecord.share(CircleKeyShare(keys, to: peer.sealing, from: identity.signingKey)).bytes],
                                 circle: circle, stream: .keys)
        try save()
    }

    /// Removes the member that `peer` names and starts a new key generation shared with the
    /// members that remain: the removed device cannot open anything sealed after this.
    ///
    /// `peer` is a member's name or the start of its signing key in hex (8 digits or more), for
    /// when two devices share a name.
    public func remove(_ peer: String) async throws {
        try await pullMembership()
        let keyPrefix = peer.count >= 8 && peer.allSatisfy(\.isHexDigit) ? peer.lowercased() : nil
        let matching = members.filter { member in
            member.name == peer || keyPrefix.map { Hex.encode(member.signing.bytes).hasPrefix($0) } == true
        }
        let listing = { (peers: [PeerIdentity]) in
            peers.map { "\($0.name) (\(Hex.encode($0.signing.bytes).prefix(16))…)" }.joined(separator: ", ")
        }
        guard let subject = matching.first else {
            throw CircleError.invalid("no member is named \(peer) or has a key starting with it; members: \(listing(members))")
        }
        guard matching.count == 1 else {
            throw CircleError.invalid("\(matching.count) members match \(peer): \(listing(matching)); name one by the start of its key")
        }
        let afterRemoval = try await publish(MembershipEntry(.remove, subject: subject, after: history, circle: circle, signer: identity.signingKey))
        let keys = CircleKeys(circle: circle, epoch: afterRemoval.epoch)
        let wrapped = keys.wrappedClassKeys()
        try SyncSecrets.storeCircleKey(keys.circleKey, device, circle: circle, epoch: keys.epoch)
        let shares = afterRemoval.members.values.map { KeyRecord.share(CircleKeyShare(keys, to: $0.sealing, from: identity.signingKey)).bytes }
        try await transport.push([KeyRecord.classKeys(epoch: keys.epoch, wrapped: wrapped).bytes] + shares, circle: circle, stream: .keys)
        try adopt(keys, wrapped: wrapped)
    }

    /// Pushes the device's own writes and pulls everyone else's until this member is current.
    public func sync() async throws -> SyncReport {
        var report = SyncReport()
        let before = position
        try await pullMembership()
        guard history.isMember(identity.signingKey.publicKey) else {
            throw CircleError.invalid("\(device.info.name) was removed from circle \(circle); it no longer syncs")
        }
        try await pullKeys()
        try await push(&report)
        try await pull(&report)
        // An idle node passes every second: it rewrites its state only when the pass moved it.
        if position != before { try save() }
        return report
    }

    /// How far this member has come; everything `sync.json` holds changes only with it.
    private struct Position: Equatable {
        var cursors: [RelayStream: UInt64]
        var pushedThrough: Int64
        var waiting: Int
        var membershipEntries: Int
        var generations: Int
    }

    private var position: Position {
        Position(cursors: cursors, pushedThrough: pushedThrough, waiting: waiting.count,
                 membershipEntries: history.entries.count, generations: publishedClassKeys.count)
    }

    // MARK: Membership and keys

    private func finishJoining(membershipCursor: UInt64) async throws {
        guard history.isMember(identity.signingKey.publicKey) else {
            throw CircleError.invalid("no member has vouched for \(device.info.name) in circle \(circle)")
        }
        cursors[.membership] = membershipCursor
        try await pullKeys()
        guard generations[history.epoch] != nil else {
            throw CircleError.invalid("the keys of circle \(circle) have not been shared with \(device.info.name) yet")
        }
        try save()
    }

    private func adopt(_ keys: CircleKeys, wrapped: [UInt8]) throws {
        generations[keys.epoch] = keys
        publishedClassKeys[keys.epoch] = wrapped
        try save()
    }

    /// Publishes a membership entry, then reads the log back: when two members change the
    /// circle at the same moment, both entries take the same place, and every member keeps the
    /// one the relay holds first. The other's author learns it lost here, instead of keeping a
    /// history nobody else has. Returns the membership as of the entry.
    @discardableResult
    private func publish(_ entry: MembershipEntry) async throws -> CircleHistory {
        var check = history
        try check.append(entry)
        try await transport.push([entry.bytes], circle: circle, stream: .membership)
        try await pullMembership()
        guard let index = history.entries.firstIndex(where: { $0.bytes == entry.bytes }) else {
            throw CircleError.invalid("another member changed circle \(circle) at the same moment, and its change came first; "
                                      + "nothing was changed here: run the command again")
        }
        return try CircleHistory(verifying: Array(history.entries[...index]))
    }

    private func pullMembership() async throws {
        let records = try await transport.pull(circle: circle, stream: .membership, after: cursors[.membership] ?? 0, limit: 10_000)
        try history.extend(with: records.map { try MembershipEntry(bytes: $0.body) })
        if let last = records.last { cursors[.membership] = last.cursor }
    }

    private func pullKeys() async throws {
        let records = try await transport.pull(circle: circle, stream: .keys, after: cursors[.keys] ?? 0, limit: 10_000)
        for record in records {
            switch try? KeyRecord(bytes: record.body) {
            case .classKeys(let epoch, let bytes)?: publishedClassKeys[epoch] = bytes
            case .share(let share)? where share.recipient == identity.sealingKey.publicKey:
                // A share from outside the circle, or forged, is ignored like any stranger's.
                if let key = try? share.open(with: identity.sealingKey, trusting: Set(history.members.keys)) {
                    try SyncSecrets.storeCircleKey(key, device, circle: circle, epoch: share.epoch)
                }
            default: continue
            }
        }
        if let last = records.last { cursors[.keys] = last.cursor }
        try openGenerations()
    }

    /// Every generation whose circle key this device holds and whose class keys are published.
    private func openGenerations() throws {
        for (epoch, wrapped) in publishedClassKeys where generations[epoch] == nil {
            guard let key = try SyncSecrets.circleKey(device, circle: circle, epoch: epoch) else { continue }
            generations[epoch] = try CircleKeys(circle: circle, epoch: epoch, circleKey: key, wrappedClassKeys: wrapped)
        }
    }

    // MARK: Items

    private func push(_ report: inout SyncReport) async throws {
        guard let keys = generations[history.epoch] else { return }
        let changes = try device.deviceKeychain.changes(since: pushedThrough, includingData: true)
        var items: [(item: SyncedItem, changeSequence: Int64)] = []
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
            items.append((SyncedItem(version: clock.tick(wallMilliseconds: wallClock()), isTombstone: change.isTombstone, record: record),
                          change.changeSequence))
        }
        // A batch at a time, so the others start on the first while the rest is sealed.
        let author = identity.signingKey
        for start in stride(from: 0, to: items.count, by: EnvelopeBatch.maximumCount) {
            let page = items[start..<min(start + EnvelopeBatch.maximumCount, items.count)]
            let sealed = try ParallelMap.map(Array(page)) { item in
                try SealedEnvelope.seal(item.item, keys: keys, author: author.publicKey)
            }
            let batches = EnvelopeBatch.batches(of: sealed, circle: circle, author: author)
            try await transport.push(batches.map(\.bytes), circle: circle, stream: .envelopes)
            for item in page {
                held[item.item.record.uuid] = HeldVersion(stamp: item.item.stamp, changeSequence: item.changeSequence)
            }
            report.pushed += page.count
        }
        if let last = changes.last { pushedThrough = last.changeSequence }
    }

    private func pull(_ report: inout SyncReport) async throws {
        let retry = waiting
        waiting = []
        try apply(retry, &report)
        while true {
            let records = try await transport.pull(circle: circle, stream: .envelopes, after: cursors[.envelopes] ?? 0, limit: 8)
            guard let last = records.last else { break }
            for record in records {
                do {
                    let batch = try EnvelopeBatch(bytes: record.body)
                    // This member's own batches come back too.
                    guard batch.author != identity.signingKey.publicKey else { continue }
                    try apply(try batch.verified(members: Set(history.members.keys)), &report)
                } catch let error as EnvelopeError {
                    report.rejected.append("\(error)")
                }
            }
            cursors[.envelopes] = last.cursor
        }
    }

    /// Opens a batch's envelopes on every core, keeps the versions the merge rule prefers, and
    /// writes them in one transaction. The envelopes' signature has been checked: on arrival,
    /// or before they were kept waiting for unlock.
    private func apply(_ envelopes: [SealedEnvelope], _ report: inout SyncReport) throws {
        let generations = generations
        let opened = try ParallelMap.map(envelopes) { envelope in
            Result { () throws(EnvelopeError) -> (SyncedItem, VersionStamp) in
                guard let keys = generations[envelope.header.epoch] else {
                    throw .cannotDecrypt("item \(envelope.header.item) is sealed under key generation \(envelope.header.epoch), which this member does not hold")
                }
                do {
                    let item = try envelope.open(with: keys)
                    return (item, item.stamp)
                } catch let error as EnvelopeError { throw error } catch { throw .malformed("\(error)") }
            }
        }
        var chosen: [(envelope: SealedEnvelope, item: SyncedItem, stamp: VersionStamp)] = []
        var positions: [UUID: Int] = [:]
        for (envelope, result) in zip(envelopes, opened) {
            switch result {
            case .failure(let error):
                report.rejected.append("\(error)")
            case .success(let (item, stamp)):
                clock.observe(item.version)
                let uuid = item.record.uuid
                let current = positions[uuid].map { chosen[$0].stamp } ?? held[uuid]?.stamp
                if let current, !MergeRule.prefers(stamp, over: current) {
                    report.superseded += 1
                    continue
                }
                if let position = positions[uuid] {
                    chosen[position] = (envelope, item, stamp)
                    report.superseded += 1
                } else {
                    positions[uuid] = chosen.count
                    chosen.append((envelope, item, stamp))
                }
            }
        }
        guard !chosen.isEmpty else { return }
        let versions = chosen.map { choice in
            Keychain.ReplicatedVersion(record: choice.item.record, tombstoneDate: choice.item.isTombstone
                ? Date(timeIntervalSince1970: Double(choice.item.version.milliseconds) / 1000) : nil)
        }
        do {
            // Two items added apart under one primary key: the preferred one stays everywhere.
            let sequences = try device.deviceKeychain.applyReplicated(versions) { index, holder in
                guard let other = held[holder] else { return true }
                guard MergeRule.prefers(chosen[index].stamp, over: other.stamp) else { return false }
                held[holder] = nil
                return true
            }
            for (choice, sequence) in zip(chosen, sequences) {
                guard let sequence else { report.superseded += 1; continue }
                held[choice.item.record.uuid] = HeldVersion(stamp: choice.stamp, changeSequence: sequence)
                report.applied += 1
            }
        } catch let error as KeychainError where error.status == .interactionNotAllowed {
            // Locked: class A cannot be sealed here yet. Keep it sealed and write the rest; before
            // first unlock nothing can be written, and everything waits.
            let now = chosen.filter { SyncClass($0.item.record.protection) != .a }
            let later = chosen.filter { SyncClass($0.item.record.protection) == .a }
            guard !later.isEmpty, !now.isEmpty else {
                waiting += chosen.map(\.envelope)
                report.waitingForUnlock += chosen.count
                return
            }
            waiting += later.map(\.envelope)
            report.waitingForUnlock += later.count
            try apply(now.map(\.envelope), &report)
        } catch {
            report.rejected += chosen.map { "item \($0.item.record.uuid): \(error)" }
        }
    }

    // MARK: State

    private func save() throws {
        let state = SyncState(
            name: name, relay: relay, membership: history.entries.map { Data($0.bytes) },
            classKeys: publishedClassKeys.mapValues { Data($0) },
            cursors: Dictionary(uniqueKeysWithValues: cursors.map { ($0.key.rawValue, $0.value) }),
            pushedThrough: pushedThrough, clock: clock.latest,
            held: held.mapValues { .init(milliseconds: $0.stamp.timestamp.milliseconds, counter: $0.stamp.timestamp.counter,
                                         digest: Data($0.stamp.digest), changeSequence: $0.changeSequence) },
            waiting: waiting.map { Data($0.bytes) })
        try state.save(in: device.directory)
    }

    private func restore(_ state: SyncState) throws {
        publishedClassKeys = state.classKeys.mapValues { [UInt8]($0) }
        cursors = Dictionary(uniqueKeysWithValues: state.cursors.compactMap { key, value in RelayStream(rawValue: key).map { ($0, value) } })
        pushedThrough = state.pushedThrough
        clock = HybridClock(latest: state.clock)
        held = state.held.mapValues {
            HeldVersion(stamp: VersionStamp(timestamp: HybridTimestamp(milliseconds: $0.milliseconds, counter: $0.counter), digest: [UInt8]($0.digest)),
                        changeSequence: $0.changeSequence)
        }
        waiting = try state.waiting.map { try SealedEnvelope(bytes: [UInt8]($0)) }
        // Before first unlock the circle keys cannot be read yet; the next sync opens them.
        try? openGenerations()
    }
}
