package import Foundation
package import KeychainModel
package import KeychainStore
package import KeyferryCrypto
import KeyferryThreads
package import SyncWire

/// One member's side of sync: it seals the device's own writes of eligible items into
/// envelopes and pushes them, and pulls what other members wrote, keeping of each item the
/// version the merge rule prefers. Its secrets live in the device's keychain, sealed until the
/// device's first unlock, and the rest in `sync.json` beside it. See Protocol/sync.md.
///
/// What blocks (the keychain, `sync.json`) goes through the device's door for calls
/// (`Device.run`), and sealing and signature checks to the same pool, never the cooperative
/// pool that serves a node's socket. One operation runs at a time (`exclusively`).
package actor SyncEngine {
    // The state below is internal rather than private: SyncEngine+Items.swift and
    // SyncEngine+Joining.swift work on it too.
    let device: Device
    let transport: any RelayTransport
    package let relay: URL
    package let name: String
    /// Read from the keychain on first need: before first unlock it is sealed.
    var unsealedIdentity: DeviceIdentity?
    /// This member's signing key as `sync.json` recorded it, for while the identity is sealed.
    var recordedMemberKey: SigningPublicKey?
    package private(set) var history: CircleHistory
    var generations: [UInt32: CircleKeys] = [:]
    var publishedClassKeys: [UInt32: [UInt8]] = [:]
    var clock = HybridClock()
    /// Every change up to here is pushed (or is not to be).
    var pushedThrough: Int64 = 0
    var cursors: [RelayStream: UInt64] = [:]
    /// What the relay last heard this member acknowledge (from this process): the envelopes
    /// cursor, and when (the device's clock).
    var acknowledged: (cursor: UInt64, at: Date?) = (0, nil)
    /// A deletion was read since then: the relay waits for every member's word to let it go.
    var deletionsRead = false
    /// How often a member that reads no deletion still acknowledges, so the relay knows it is
    /// not away (Protocol/relay.md, "Deletions, acknowledgements and resync").
    static let acknowledgementInterval: TimeInterval = 6 * 3_600
    /// Envelopes that could not be written yet (class A while locked), oldest first.
    var waiting: [SealedEnvelope] = []
    /// The head of this member's own chain of batches.
    var ownChain = BatchLink.start
    /// What arrived of the others' chains: gaps are batches withheld from this member.
    package internal(set) var received = AuthorChains()
    /// Records refused outside a pass (a membership entry read by `vouch`), for the next report.
    var unreported = SyncReport()
    /// The circle changed since this member last renewed its approvals (`renewApprovals`).
    var approvalsToRenew = true

    /// An operation (a pass, a vouch, a removal) is under way; the next ones wait their turn.
    private var busy = false
    private var turns: [CheckedContinuation<Void, Never>] = []

    /// Records one pass reads from the envelopes stream, at most: a pass always returns, even
    /// from a relay that answers every pull with one more record.
    static let maximumRecordsPerPass = 2_048

    package var circle: UUID { history.circle }
    package var epoch: UInt32 { history.epoch }
    /// The members, this device among them, by name.
    package var members: [PeerIdentity] { history.members.values.sorted { $0.name < $1.name } }
    /// This member's signing key; nil only while the identity is sealed and an older
    /// `sync.json` did not record it.
    package var signingKey: SigningPublicKey? { unsealedIdentity?.signingKey.publicKey ?? recordedMemberKey }
    /// Whether the membership, as far as this member has read it, still counts this device.
    package var isMember: Bool { signingKey.map(history.isMember) ?? true }
    /// Items received while locked, waiting for unlock.
    package var waitingCount: Int { waiting.count }

    /// What a member's status shows, read at one moment: one state, never parts of two.
    package struct Snapshot: Sendable {
        package let circle: UUID
        package let relay: URL
        package let name: String
        package let epoch: UInt32
        /// By name, this device among them.
        package let members: [PeerIdentity]
        package let signingKey: SigningPublicKey?
        package let isMember: Bool
        package let waitingCount: Int
        package let received: AuthorChains
    }

    package var snapshot: Snapshot {
        Snapshot(
            circle: circle, relay: relay, name: name, epoch: epoch, members: members, signingKey: signingKey, isMember: isMember,
            waitingCount: waitingCount, received: received)
    }

    /// What `sync status` lists: eligible local writes not pushed yet, and the synchronizable
    /// items that stay here because they are ThisDeviceOnly (named account @ service; those
    /// sealed in this lock state are counted, not named).
    package func localStatus() async throws -> (pending: Int, deviceBound: [String]) {
        let pushedThrough = pushedThrough
        let (feed, ownWrites) = try await device.run { device in
            (try device.deviceKeychain.availableChanges(since: 0), try Self.ownWrites(on: device, after: pushedThrough, through: .max))
        }
        var pending = feed.sealed.filter { isPending($0.changeSequence, ownWrites) && replicates($0) }.count
        var deviceBound: [String] = []
        for change in feed.open {
            switch SyncEligibility(change.record) {
            case .replicates:
                if isPending(change.changeSequence, ownWrites) { pending += 1 }
            case .deviceBound where !change.isTombstone:
                let text = { (key: AttributeKey) -> String? in
                    change.record.attributes[key]?.text.flatMap { $0.isEmpty ? nil : $0 }
                }
                deviceBound.append([text(.account), text(.service) ?? text(.server)].compactMap { $0 }.joined(separator: " @ "))
            default: continue
            }
        }
        let sealedBound = feed.sealed.filter { $0.synchronizable && $0.protection.isThisDeviceOnly && !$0.isTombstone }.count
        if sealedBound > 0 { deviceBound.append("\(sealedBound) more, sealed until unlock") }
        return (pending, deviceBound.sorted())
    }

    private init(device: Device, identity: DeviceIdentity?, name: String, history: CircleHistory, relay: URL, transport: any RelayTransport) {
        self.device = device
        unsealedIdentity = identity
        self.name = name
        self.history = history
        self.relay = relay
        self.transport = transport
    }

    /// How a device appears to the members who vouch for it. Makes its identity on first use.
    package static func peerIdentity(of device: Device, name: String) async throws -> PeerIdentity {
        try await device.run { try SyncSecrets.identity(of: $0).peer(named: name) }
    }

    /// Creates a circle with this device as its only member, and publishes its membership and
    /// first key generation.
    package static func create(device: Device, name: String, relay: URL, transport: any RelayTransport) async throws -> SyncEngine {
        try PeerIdentity.check(name: name)
        try await requireNoCircle(device)
        let identity = try await device.run { try SyncSecrets.identity(of: $0) }
        let history = CircleHistory(creator: identity, name: name)
        let engine = SyncEngine(device: device, identity: identity, name: name, history: history, relay: relay, transport: transport)
        let keys = CircleKeys(circle: history.circle, epoch: history.epoch)
        let wrapped = keys.wrappedClassKeys()
        try await transport.push(history.entries.map(\.bytes), circle: history.circle, stream: .membership, proof: nil)
        try await engine.push(
            [
                KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: wrapped, signer: identity.signingKey)).bytes,
                KeyRecord.share(CircleKeyShare(keys, to: identity.sealingKey.publicKey, from: identity.signingKey)).bytes,
            ],
            to: .keys, as: identity)
        _ = try await device.run { try SyncSecrets.storeCircleKey(keys.circleKey, $0, circle: keys.circle, epoch: keys.epoch) }
        try await engine.adopt(keys, wrapped: wrapped)
        return engine
    }

    /// Joins the circle a member vouched for. Everything the joiner can refuse is checked
    /// first: that it is in no circle, that a member signed the voucher, that the relay's history
    /// is the sponsor's and takes the sponsor's entry, that the share opens the current keys.
    /// Only then is the entry published, so a refusal leaves the circle and the device as they were.
    /// `relay` is where this member syncs: the voucher's, or another relay of the same database.
    package static func join(_ voucher: Voucher, through relay: URL? = nil, device: Device, transport: any RelayTransport) async throws -> SyncEngine {
        try await requireNoCircle(device)
        let identity = try await device.run { try SyncSecrets.identity(of: $0) }
        let me = identity.signingKey.publicKey
        guard voucher.isSignedBySponsor else {
            throw CircleError(.forged, "the voucher's signature does not hold: it was edited, or not made by the member it names; nothing was changed")
        }
        guard voucher.shares.allSatisfy({ $0.recipient == identity.sealingKey.publicKey }) else {
            throw CircleError(.notVouched, "the voucher was made for another device; ask the sponsor again")
        }
        if let entry = voucher.entry, entry.kind != .join || entry.subject.signing != me {
            throw CircleError(.notVouched, "the voucher's membership entry does not admit \(device.info.name) to circle \(voucher.circle)")
        }
        let (current, lastCursor) = try await relayHistory(voucher.circle, at: voucher.relay, transport)
        guard current.entries.contains(where: { ContentDigest.of($0.bytes) == voucher.head }) else {
            throw CircleError(
                .invalidHistory,
                "the relay at \(voucher.relay.absoluteString) shows a history of circle \(voucher.circle) "
                    + "that is not the one the sponsor is in; nothing was changed")
        }
        guard current.isMember(voucher.sponsor) else {
            throw CircleError(.forged, "the voucher's sponsor is not a member of circle \(voucher.circle); nothing was changed")
        }
        var admitted = current
        if let entry = voucher.entry, !current.isMember(me) {
            guard entry.previous == ContentDigest.of(current.entries.last!.bytes) else {
                throw CircleError(
                    .staleVoucher,
                    "circle \(voucher.circle) changed after the sponsor vouched (a voucher admits once, into the circle as it was): "
                        + "nothing was changed; ask a member for a new one")
            }
            try admitted.append(entry)
        }
        guard let subject = admitted.members[me] else {
            throw CircleError(.notVouched, "no member has vouched for \(device.info.name) in circle \(voucher.circle)")
        }
        guard voucher.share.epoch == admitted.epoch else {
            throw CircleError(
                .staleVoucher, "circle \(voucher.circle) changed its keys after the sponsor vouched: nothing was changed; ask a member for a new voucher")
        }
        let circleKey = try voucher.share.open(with: identity.sealingKey, trusting: Set(admitted.members.keys))
        let earlier = try voucher.shares.dropLast().map { ($0.epoch, try $0.open(with: identity.sealingKey, trusting: Set(admitted.members.keys))) }
        let engine = SyncEngine(
            device: device, identity: identity, name: subject.name, history: current, relay: relay ?? voucher.relay, transport: transport)
        await engine.setCursor(.membership, lastCursor)
        let generation = try await engine.openGeneration(admitted.epoch, circleKey: circleKey, author: admitted.generationAuthors[admitted.epoch]!)
        if let entry = voucher.entry, !current.isMember(me) { try await engine.publish(entry) }
        // The earlier generations open at the first pass, with their class keys read here.
        let keys = [(admitted.epoch, circleKey)] + earlier.filter { $0.0 < admitted.epoch }
        try await device.run { device in
            for (epoch, key) in keys { try SyncSecrets.storeCircleKey(key, device, circle: voucher.circle, epoch: epoch) }
        }
        try await engine.adopt(generation.keys, wrapped: generation.wrapped)
        return engine
    }

    /// The member whose state is in the device's directory; nil when it is in no circle. Reads
    /// no secret: before first unlock the member starts sealed and opens at its first pass
    /// after unlock.
    package static func open(device: Device, transport: (URL) -> any RelayTransport) async throws -> SyncEngine? {
        let read = try await device.run { device -> (SyncState, CircleHistory)? in
            guard let state = try SyncState.load(from: device.directory) else { return nil }
            return (state, try CircleHistory(verifying: state.membership.map { try MembershipEntry(bytes: [UInt8]($0)) }))
        }
        guard let (state, history) = read else { return nil }
        let engine = SyncEngine(
            device: device, identity: nil, name: state.name, history: history, relay: state.relay,
            transport: transport(state.relay))
        try await engine.restore(state)
        return engine
    }

    /// Refuses a device without iCloud Keychain (the iOS Simulator) anything to do with a circle.
    package static func requireICloudKeychain(_ device: Device) throws {
        guard device.info.profile.hasICloudKeychain else {
            throw CircleError(
                .noICloudKeychain,
                "\(device.info.name) is an iOS Simulator, which has no iCloud Keychain: its synchronizable items never leave it. "
                    + "Use the iphone profile to test sync.")
        }
    }

    /// Refuses a device in a circle; of one it left, forgets what a leave cut short kept.
    static func requireNoCircle(_ device: Device) async throws {
        try requireICloudKeychain(device)
        try await device.run { device in
            guard try SyncState.load(from: device.directory) == nil else {
                throw CircleError(.alreadyInCircle, "\(device.info.name) is already in a circle.")
            }
            try device.deviceKeychain.forgetReplicaVersions()
        }
    }

    /// Vouches for `peer`: a signed entry admitting it and its share of the current keys, for
    /// the joiner to check and publish (`join`), answering `request` when it asked on the relay.
    /// Nothing changes until the joiner publishes.
    package func vouch(for peer: PeerIdentity) async throws -> Voucher {
        try await exclusively { try await makeVoucher(for: peer) }
    }

    /// `vouch`, answering `request` when the device asked on the relay.
    func makeVoucher(for peer: PeerIdentity, answering request: JoinRequest? = nil) async throws -> Voucher {
        let identity = try await identity()
        try await pullMembership()
        try requireMembership(identity)
        try PeerIdentity.check(name: peer.name)
        if generations[history.epoch] == nil {
            // A generation started since this member's last pass: its keys are on the relay.
            var refused = SyncReport()
            try await pullKeys(identity, &refused)
            unreported.absorb(refused)
            try await save()
        }
        guard generations[history.epoch] != nil else { throw CircleError(.keysUnavailable, "this member does not hold the circle's current keys") }
        let entry = history.isMember(peer.signing) ? nil : MembershipEntry(.join, subject: peer, after: history, signer: identity.signingKey)
        // Every generation held, newest last: versions untouched since a removal stay sealed
        // under the generation before it.
        let held = generations.values.sorted { $0.epoch < $1.epoch }.suffix(Int(Voucher.maximumShares))
        return Voucher(
            circle: circle, relay: relay, head: ContentDigest.of(history.entries.last!.bytes), request: request?.digest, entry: entry,
            shares: held.map { CircleKeyShare($0, to: peer.sealing, from: identity.signingKey) }, sponsor: identity.signingKey)
    }

    /// Removes the member that `peer` names and starts a new key generation shared with the
    /// members that remain: the removed device cannot open anything sealed after this.
    ///
    /// `peer` is a member's name or the start of its signing key in hex (8 digits or more, an
    /// ellipsis pasted with it allowed), for when two devices share a name.
    package func remove(_ peer: String) async throws {
        try await exclusively { try await removeMember(named: peer) }
    }

    private func removeMember(named peer: String) async throws {
        let identity = try await identity()
        try await pullMembership()
        try requireMembership(identity)
        let typed = peer.hasSuffix("…") ? String(peer.dropLast()) : peer
        let keyPrefix = typed.count >= 8 && typed.allSatisfy(\.isHexDigit) ? typed.lowercased() : nil
        let matching = members.filter { member in
            member.name == peer || keyPrefix.map { Hex.encode(member.signing.bytes).hasPrefix($0) } == true
        }
        let listing = { (peers: [PeerIdentity]) in
            peers.map { "\($0.name) (\(Hex.encode($0.signing.bytes).prefix(16))…)" }.joined(separator: ", ")
        }
        guard let subject = matching.first else {
            throw CircleError(.noSuchMember, "no member is named \(peer) or has a key starting with it (8 hex digits or more); members: \(listing(members))")
        }
        guard matching.count == 1 else {
            throw CircleError(.ambiguousMember, "\(matching.count) members match \(peer): \(listing(matching)); name one by the start of its key")
        }
        guard subject.signing != identity.signingKey.publicKey else {
            throw CircleError(.cannotRemoveSelf, "\(subject.name) is this device; to take it out of the circle, `circle leave` it")
        }
        try await removeMember(subject, identity)
    }

    /// Takes this device out of its circle and forgets the circle's keys and state; the items
    /// it received stay. A member publishes its own removal first, with a new key generation
    /// for those who stay (made as a remover makes one, and forgotten here at once), so the
    /// circle goes on without it. A device already removed only forgets. `force` forgets
    /// even when the relay cannot be reached: the others then keep sharing keys with this
    /// device until one of them removes it.
    package func leave(force: Bool) async throws {
        try await exclusively {
            do {
                let identity = try await identity()
                try await pullMembership()
                if history.isMember(identity.signingKey.publicKey) {
                    try await removeMember(history.members[identity.signingKey.publicKey]!, identity)
                }
            } catch  where force {}
            try await device.run { device in
                try SyncState.remove(from: device.directory)
                try device.deviceKeychain.forgetReplicaVersions()
                try? SyncSecrets.forgetCircleKeys(device)
            }
            generations = [:]
        }
    }

    private func removeMember(_ subject: PeerIdentity, _ identity: DeviceIdentity) async throws {
        let afterRemoval = try await publish(MembershipEntry(.remove, subject: subject, after: history, signer: identity.signingKey))
        let keys = CircleKeys(circle: circle, epoch: afterRemoval.epoch)
        let wrapped = keys.wrappedClassKeys()
        let shares = afterRemoval.members.values.map { KeyRecord.share(CircleKeyShare(keys, to: $0.sealing, from: identity.signingKey)).bytes }
        try await push(
            [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: wrapped, signer: identity.signingKey)).bytes] + shares,
            to: .keys, as: identity)
        guard afterRemoval.isMember(identity.signingKey.publicKey) else { return }
        let circle = circle
        _ = try await device.run { try SyncSecrets.storeCircleKey(keys.circleKey, $0, circle: circle, epoch: keys.epoch) }
        try await adopt(keys, wrapped: wrapped)
    }

    /// Pushes the device's own writes and pulls everyone else's until this member is current,
    /// as far as the class keys in memory allow: what is sealed in this lock state waits.
    package func sync() async throws -> SyncReport {
        try await exclusively { try await pass() }
    }

    private func pass() async throws -> SyncReport {
        let identity = try await identity()
        let before = position
        try await pullMembership()
        var report = unreported
        unreported = SyncReport()
        try requireMembership(identity)
        try await pullKeys(identity, &report)
        // A join or removal makes vouchers stale that devices have not used yet.
        if history.entries.count != before.membershipEntries { approvalsToRenew = true }
        if approvalsToRenew {
            try await renewApprovals(identity)
            approvalsToRenew = false
        }
        try await push(&report, as: identity)
        try await pull(&report, identity)
        // An idle node passes every second: it rewrites its state only when the pass moved it.
        if position != before { try await save() }
        await acknowledge(identity)
        return report
    }

    /// Tells the relay how far this member has applied the envelopes, once that is saved, so
    /// the relay can let go of deletions every member has seen: after a pass that read one (its
    /// own included), on the first pass, and every few hours besides. A relay that cannot hear
    /// it now hears a later one: nothing depends on it but the relay's size.
    private func acknowledge(_ identity: DeviceIdentity) async {
        guard let cursor = cursors[.envelopes], cursor > acknowledged.cursor else { return }
        let now = device.now
        let due = acknowledged.at.map { now.timeIntervalSince($0) >= Self.acknowledgementInterval || now < $0 } ?? true
        guard deletionsRead || due else { return }
        let proof = PushProof(acknowledging: cursor, circle: circle, key: identity.signingKey)
        guard (try? await transport.acknowledge(circle: circle, through: cursor, proof: proof)) != nil else { return }
        acknowledged = (cursor, now)
        deletionsRead = false
    }

    /// How far this member has come; everything `sync.json` holds changes only with it.
    private struct Position: Equatable {
        var cursors: [RelayStream: UInt64]
        var pushedThrough: Int64
        var waiting: Int
        var membershipEntries: Int
        var generations: Int
        var clock: HybridClock
        var ownChain: BatchLink
        var received: AuthorChains
    }

    private var position: Position {
        Position(
            cursors: cursors, pushedThrough: pushedThrough, waiting: waiting.count,
            membershipEntries: history.entries.count, generations: publishedClassKeys.count, clock: clock,
            ownChain: ownChain, received: received)
    }

    /// Forgets every secret this member unsealed (the identity, the circle's keys): what a
    /// reboot does. The next pass after unlock reads them again.
    package func seal() {
        unsealedIdentity = nil
        generations = [:]
    }

    // MARK: Identity, membership and keys

    /// The device identity, unsealed on first need with the circle keys held. Before first
    /// unlock their class key is not in memory: the member waits, and says so.
    func identity() async throws -> DeviceIdentity {
        if let unsealedIdentity { return unsealedIdentity }
        do {
            let identity = try await device.run { try SyncSecrets.identity(of: $0) }
            unreported.reject(try await openGenerations())
            unsealedIdentity = identity
            return identity
        } catch let error as KeychainError where error.status == .interactionNotAllowed {
            throw KeychainError(
                .interactionNotAllowed,
                "\(device.info.name) has not been unlocked since it was powered on, so its sync "
                    + "identity stays sealed; unlock it and it syncs from then on.")
        }
    }

    func requireMembership(_ identity: DeviceIdentity) throws {
        guard history.isMember(identity.signingKey.publicKey) else {
            throw CircleError(
                .removed,
                "\(device.info.name) was removed from circle \(circle); it no longer syncs. "
                    + "`circle leave` forgets the circle, so it can join one again.")
        }
    }

    private func setCursor(_ stream: RelayStream, _ cursor: UInt64) { cursors[stream] = cursor }

    private func adopt(_ keys: CircleKeys, wrapped: [UInt8]) async throws {
        generations[keys.epoch] = keys
        publishedClassKeys[keys.epoch] = wrapped
        try await save()
    }

    /// Reads the keys stream for generation `epoch`'s class keys, signed by `author`, and opens
    /// them with `circleKey`: what a joiner checks before it publishes its entry. Keeps the
    /// class keys of earlier generations it reads, each signed by its own author, to open
    /// with the earlier shares of its voucher.
    private func openGeneration(_ epoch: UInt32, circleKey: SymmetricKey, author: SigningPublicKey) async throws -> (keys: CircleKeys, wrapped: [UInt8]) {
        let records = try await transport.pull(circle: circle, stream: .keys, after: 0, limit: 10_000)
        if let last = records.last { cursors[.keys] = last.cursor }
        var found: (keys: CircleKeys, wrapped: [UInt8])?
        for record in records {
            guard case .classKeys(let published)? = try? KeyRecord(bytes: record.body), let generationAuthor = history.generationAuthors[published.epoch],
                published.isSigned(by: published.epoch == epoch ? author : generationAuthor, circle: circle)
            else { continue }
            if published.epoch < epoch, publishedClassKeys[published.epoch] == nil { publishedClassKeys[published.epoch] = published.wrapped }
            guard found == nil, published.epoch == epoch,
                let keys = try? CircleKeys(circle: circle, epoch: epoch, circleKey: circleKey, wrappedClassKeys: published.wrapped)
            else { continue }
            found = (keys, published.wrapped)
        }
        if let found { return found }
        throw CircleError(
            .keysUnavailable, "the keys of generation \(epoch) of circle \(circle) are not on the relay, or do not open with the share; nothing was changed")
    }

    /// Publishes a membership entry, then reads the log back: when two members change the
    /// circle at the same moment, both entries take the same place, and every member keeps the
    /// one the relay holds first (a relay that checks entries refuses the second outright). The
    /// other's author learns it lost here, instead of keeping a history nobody else has.
    /// Returns the membership as of the entry.
    @discardableResult
    private func publish(_ entry: MembershipEntry) async throws -> CircleHistory {
        var check = history
        try check.append(entry)
        do {
            try await transport.push([entry.bytes], circle: circle, stream: .membership, proof: nil)
        } catch {
            try await pullMembership()
            guard history.entries.count > Int(entry.sequence) else { throw error }
        }
        try await pullMembership()
        guard let index = history.entries.firstIndex(where: { $0.bytes == entry.bytes }) else {
            throw CircleError(
                .concurrentChange,
                "another member changed circle \(circle) at the same moment, and its change came first; "
                    + "nothing was changed here: run the command again")
        }
        return try CircleHistory(verifying: Array(history.entries[...index]))
    }

    /// Pushes records a member signs for (the `keys`, `envelopes` and `joins` streams).
    func push(_ bodies: [[UInt8]], to stream: RelayStream, as identity: DeviceIdentity) async throws {
        try await transport.push(
            bodies, circle: circle, stream: stream,
            proof: PushProof(signing: bodies, circle: circle, stream: stream, key: identity.signingKey))
    }

    /// Reads the entries after the cursor; what does not extend the history is passed over and
    /// reported, never a reason to stop.
    func pullMembership() async throws {
        let records = try await transport.pull(circle: circle, stream: .membership, after: cursors[.membership] ?? 0, limit: 10_000)
        unreported.reject(history.extend(with: records.lazy.map(\.body)))
        if let last = records.last { cursors[.membership] = last.cursor }
    }

    /// Reads the key records after the cursor. A generation's class keys and shares are taken
    /// only from the member who made it (`CircleHistory.generationAuthors`), so nobody else can
    /// plant one; a second, different key or class-key set for a generation is refused and
    /// reported; the first stays.
    private func pullKeys(_ identity: DeviceIdentity, _ report: inout SyncReport) async throws {
        let records = try await transport.pull(circle: circle, stream: .keys, after: cursors[.keys] ?? 0, limit: 10_000)
        var membershipRead = false
        for record in records {
            let keyRecord: KeyRecord
            do { keyRecord = try KeyRecord(bytes: record.body) } catch {
                report.reject(Self.refusal(error, "key record: "))
                continue
            }
            if case .share(let share) = keyRecord, share.recipient != identity.sealingKey.publicKey { continue }
            let epoch = keyRecord.epoch
            // The entry that starts a generation is published before its keys, but may have
            // reached the relay after this pass read the membership: read it again, once.
            if history.generationAuthors[epoch] == nil, !membershipRead {
                try await pullMembership()
                membershipRead = true
            }
            guard let author = history.generationAuthors[epoch] else {
                report.reject(.unknownGeneration, "key record for generation \(epoch), which no membership entry started")
                continue
            }
            switch keyRecord {
            case .classKeys(let published):
                guard published.isSigned(by: author, circle: circle) else {
                    report.reject(.forged, "class keys of generation \(epoch) not signed by the member who made it")
                    continue
                }
                if let held = publishedClassKeys[epoch] {
                    if held != published.wrapped {
                        report.reject(.conflictingKeys, "a second, different set of class keys for generation \(epoch) was refused; the first stays")
                    }
                    continue
                }
                publishedClassKeys[epoch] = published.wrapped
            case .share(let share):
                let key: SymmetricKey
                do { key = try share.open(with: identity.sealingKey, trusting: [author]) } catch {
                    report.reject(Self.refusal(error))
                    continue
                }
                let circle = circle
                guard try await device.run({ try SyncSecrets.storeCircleKey(key, $0, circle: circle, epoch: epoch) }) else {
                    report.reject(.conflictingKeys, "a second, different circle key for generation \(epoch) was refused; the first stays")
                    continue
                }
            }
        }
        if let last = records.last { cursors[.keys] = last.cursor }
        report.reject(try await openGenerations())
    }

    /// Opens every generation whose circle key this device holds and whose class keys are
    /// published; returns why any did not open.
    private func openGenerations() async throws -> [Refusal] {
        let closed = publishedClassKeys.filter { generations[$0.key] == nil }
        guard !closed.isEmpty else { return [] }
        let circle = circle
        let keys = try await device.run { device in
            try closed.keys.compactMap { epoch in try SyncSecrets.circleKey(device, circle: circle, epoch: epoch).map { (epoch, $0) } }
        }
        var refused: [Refusal] = []
        for (epoch, key) in keys {
            let wrapped = closed[epoch]!
            do {
                generations[epoch] = try CircleKeys(circle: circle, epoch: epoch, circleKey: key, wrappedClassKeys: wrapped)
            } catch {
                refused.append(Self.refusal(error))
            }
        }
        return refused
    }

    /// A refusal named by its error's kind; an error that is no envelope error is inconsistent.
    static func refusal(_ error: any Error, _ prefix: String = "") -> Refusal {
        guard let error = error as? EnvelopeError else { return Refusal(.inconsistent, prefix + "\(error)") }
        var refusal = Refusal(error)
        refusal.detail = prefix + refusal.detail
        return refusal
    }

    /// Changes read and pushed at a time: memory stays bounded whatever the number of items.
    var pushPage = 10_000

    // MARK: State

    /// Runs `operation` when no other is under way. Each operation reads the member's state,
    /// awaits the relay and the device, and moves the state on: a second one interleaved at
    /// those awaits would push the same changes twice, or fork this member's chain of batches.
    func exclusively<Result>(_ operation: () async throws -> Result) async throws -> Result {
        while busy { await withCheckedContinuation { turns.append($0) } }
        busy = true
        defer {
            busy = false
            if !turns.isEmpty { turns.removeFirst().resume() }
        }
        return try await operation()
    }

    private func save() async throws {
        let state = SyncState(
            name: name, member: signingKey.map { Data($0.bytes) }, relay: relay, membership: history.entries.map { Data($0.bytes) },
            classKeys: publishedClassKeys.mapValues { Data($0) },
            cursors: Dictionary(uniqueKeysWithValues: cursors.map { ($0.key.rawValue, $0.value) }),
            pushedThrough: pushedThrough, clock: clock.latest,
            clockReadings: clock.readings,
            waiting: waiting.map { Data($0.bytes) }, ownChain: ownChain, received: received)
        try await device.run { try state.save(in: $0.directory) }
    }

    private func restore(_ state: SyncState) async throws {
        recordedMemberKey = try state.member.map { try SigningPublicKey(bytes: [UInt8]($0)) }
        publishedClassKeys = state.classKeys.mapValues { [UInt8]($0) }
        cursors = Dictionary(uniqueKeysWithValues: state.cursors.compactMap { key, value in RelayStream(rawValue: key).map { ($0, value) } })
        pushedThrough = state.pushedThrough
        clock = HybridClock(readings: state.clockReadings ?? [HybridClock.Reading(sequence: state.pushedThrough, time: state.clock)])
        waiting = try state.waiting.map { try SealedEnvelope(bytes: [UInt8]($0)) }
        ownChain = state.ownChain ?? .start
        received = state.received ?? AuthorChains()
        if let held = state.held, !held.isEmpty {
            // Kept in sync.json before format 2: into the keychain, where a crash before the
            // state is saved again leaves them to be copied once more (a version held stays).
            let versions = held.mapValues {
                HeldVersion(
                    stamp: VersionStamp(timestamp: HybridTimestamp(milliseconds: $0.milliseconds, counter: $0.counter), digest: [UInt8]($0.digest)),
                    changeSequence: $0.changeSequence
                ).replica
            }
            try await device.run { try $0.deviceKeychain.recordReplicaVersions(versions, replacing: false) }
            try await save()
        }
    }
}
