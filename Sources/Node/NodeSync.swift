import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferryThreads
import Logging
import NodeControl
import Relay
import RelayHTTP
import Sync
import SyncWire

/// The node's side of sync: the device's member engine when it is in a circle, the loop that
/// pushes and pulls on its own while the node runs, and what `sync status` reports.
final class NodeSync: Sendable {
    /// How often a member syncs on its own; after a failure it waits longer each time, up to
    /// `maximumBackoff`, and loses nothing meanwhile.
    static let interval = Duration.seconds(1)
    static let maximumBackoff = Duration.seconds(30)

    private struct Progress {
        var engine: SyncEngine?
        /// Why the member's state could not be opened at start: every circle call says so,
        /// rather than that the device is in no circle.
        var unreadable: CircleError?
        var lastExchange: Date?
        var lastReport: SyncReport?
        var lastError: String?
        /// What every pass did since `sync now` last reported, the node's own passes included:
        /// a refusal is reported once, whichever pass met it.
        var unreported = SyncReport()
        /// This device's request to join a circle, while it waits for a member's answer.
        var joinRequest: (request: JoinRequest, relay: URL)?
    }

    private let device: Device
    private let logger: Logger
    private let progress: Locked<Progress>
    /// What the loop waits on between passes; a test moves its own on.
    private let clock: any Clock<Duration>

    /// Reads the member's state, never its secrets, so a device powered on before first
    /// unlock starts with its sync sealed. A state it cannot read does not stop the node
    /// either: `sync status` says what is wrong.
    init(device: Device, logger: Logger, clock: any Clock<Duration> = ContinuousClock()) async {
        self.device = device
        self.logger = logger
        self.clock = clock
        var start = Progress()
        do {
            start.engine = try await SyncEngine.open(device: device, transport: { RelayClient(url: $0) })
        } catch {
            start.lastError = "\(error)"
            start.unreadable =
                error as? CircleError ?? CircleError(.unreadableState, "the sync state of \(device.info.name) cannot be read: \(error)")
            logger.error("sync state unreadable", metadata: ["error": "\(error)"])
        }
        progress = Locked(start)
    }

    private var engine: SyncEngine? { progress.withLock { $0.engine } }

    /// The member, or why there is none: its state unreadable, or no circle (`notInCircle`,
    /// with `why` after the device's name).
    private func member(_ why: String = "is in no circle.") throws -> SyncEngine {
        let (engine, unreadable) = progress.withLock { ($0.engine, $0.unreadable) }
        if let engine { return engine }
        throw unreadable ?? CircleError(.notInCircle, "\(device.info.name) \(why)")
    }

    func create(_ request: NodeAPI.CircleCreate) async throws -> NodeAPI.CircleStatus {
        let relay = try Self.relayURL(request.relay)
        try requireFirstUnlock("create a circle")
        let engine = try await SyncEngine.create(
            device: device, name: request.name ?? device.info.name, relay: relay,
            transport: RelayClient(url: relay, admissionToken: request.admissionToken))
        progress.withLock {
            $0.engine = engine
            $0.unreadable = nil
        }
        let circle = await engine.circle
        logger.info("circle created", metadata: ["circle": "\(circle)"])
        return try await circleStatus()
    }

    /// The identity of this device as a joiner: refused when it cannot join, so that the
    /// sponsor is never asked to vouch for a device that would then refuse.
    func identity() async throws -> NodeAPI.Peer {
        try requireFirstUnlock("join a circle")
        let (engine, unreadable) = progress.withLock { ($0.engine, $0.unreadable) }
        if let engine {
            throw CircleError(.alreadyInCircle, "\(device.info.name) is already in circle \(await engine.circle).")
        }
        if let unreadable { throw unreadable }
        try SyncEngine.requireICloudKeychain(device)
        return Self.peer(try await SyncEngine.peerIdentity(of: device, name: device.info.name), isThisDevice: true)
    }

    func vouch(_ request: NodeAPI.Vouch) async throws -> NodeAPI.Voucher {
        let engine = try member("is in no circle, so it cannot vouch for another device.")
        let voucher = try await engine.vouch(for: try Self.identity(request.peer))
        logger.info("vouched", metadata: ["peer": "\(request.peer.name)"])
        return NodeAPI.Voucher(circle: voucher.circle, relay: voucher.relay.absoluteString, voucher: Data(voucher.bytes))
    }

    func join(_ request: NodeAPI.Voucher) async throws -> NodeAPI.CircleStatus {
        let relay = try Self.relayURL(request.relay)
        if let share = request.unsignedShare {
            // A 0.1.0 client's voucher: its parts, unsigned as a whole. Refused as before when
            // they do not decode, and by name when they do.
            do { _ = try CircleKeyShare(bytes: [UInt8](share)) } catch { throw NodeError.invalidRequest("the voucher does not decode: \(error)") }
            throw CircleError(
                .notVouched, "the voucher is in Keyferry 0.1.0's form, which its sponsor did not sign as a whole; ask the sponsor for a new one")
        }
        let voucher: Voucher
        do {
            voucher = try Voucher(bytes: [UInt8](request.voucher))
        } catch {
            throw CircleError(.notVouched, "the voucher cannot be read (\(error)); nothing was changed")
        }
        guard voucher.circle == request.circle else {
            throw CircleError(.notVouched, "the voucher is for circle \(voucher.circle), not \(request.circle); nothing was changed")
        }
        return try await join(voucher, through: relay)
    }

    private func join(_ voucher: Voucher, through relay: URL) async throws -> NodeAPI.CircleStatus {
        try requireFirstUnlock("join a circle")
        let engine = try await SyncEngine.join(voucher, through: relay, device: device, transport: RelayClient(url: relay))
        progress.withLock {
            $0.engine = engine
            $0.lastError = nil
            $0.unreadable = nil
            $0.joinRequest = nil
        }
        logger.info("circle joined", metadata: ["circle": "\(voucher.circle)"])
        return try await circleStatus()
    }

    /// Publishes this device's request to join, replacing any it made before.
    func request(_ body: NodeAPI.CircleRequest) async throws -> NodeAPI.CircleRequested {
        let relay = try Self.relayURL(body.relay)
        let lifetime = body.lifetime ?? 600
        guard lifetime >= 1, lifetime <= JoinRequest.longestLifetime else {
            throw NodeError.invalidRequest(
                "a join request waits 1 to \(Int(JoinRequest.longestLifetime)) seconds; \(String(format: "%g", lifetime)) is out of range")
        }
        try requireFirstUnlock("join a circle")
        if let engine { throw CircleError(.alreadyInCircle, "\(device.info.name) is already in circle \(await engine.circle).") }
        if let unreadable = progress.withLock({ $0.unreadable }) { throw unreadable }
        let request = try await SyncEngine.requestToJoin(
            circle: body.circle, relay: relay, name: body.name ?? device.info.name, lifetime: lifetime, device: device,
            transport: RelayClient(url: relay))
        progress.withLock { $0.joinRequest = (request, relay) }
        logger.info("asked to join", metadata: ["circle": "\(body.circle)", "code": "\(request.code)"])
        return Self.requested(request, relay: relay)
    }

    /// Where this device's request stands: reads the relay once for a member's answer, and
    /// joins when it is a voucher.
    func requestAnswer() async throws -> NodeAPI.CircleRequested {
        guard let (request, relay) = progress.withLock({ $0.joinRequest }) else {
            throw CircleError(.noSuchRequest, "\(device.info.name) has asked to join no circle since its node started")
        }
        switch try await SyncEngine.answer(to: request, device: device, transport: RelayClient(url: relay)) {
        case .pending:
            return Self.requested(request, relay: relay)
        case .expired:
            progress.withLock { $0.joinRequest = nil }
            throw CircleError(
                .requestExpired, "the request to join circle \(request.circle) expired at \(request.expires) with no answer; ask again")
        case .declined(let member):
            progress.withLock { $0.joinRequest = nil }
            throw CircleError(.declined, "\(member) declined \(device.info.name)'s request to join circle \(request.circle)")
        case .approved(let voucher):
            do {
                return Self.requested(request, relay: relay, joined: try await join(voucher, through: relay))
            } catch let error as CircleError where error.code == .staleVoucher || error.code == .concurrentChange {
                // Another device joined first: its sponsor renews the approval, and this one waits.
                return Self.requested(request, relay: relay)
            }
        }
    }

    func joinRequests() async throws -> NodeAPI.PendingJoins {
        NodeAPI.PendingJoins(requests: try await member("is in no circle.").joinRequests().map(Self.pending))
    }

    func approve(_ body: NodeAPI.CircleAnswer) async throws -> NodeAPI.PendingJoin {
        let request = try await member("is in no circle, so it cannot approve a request.").approve(code: try Self.code(body.code))
        logger.info("approved a join request", metadata: ["peer": "\(request.peer.name)", "code": "\(request.code)"])
        return Self.pending(request)
    }

    func decline(_ body: NodeAPI.CircleAnswer) async throws -> NodeAPI.PendingJoins {
        let declined = try await member("is in no circle, so it cannot decline a request.").decline(code: try Self.code(body.code))
        logger.info("declined join requests", metadata: ["peers": "\(declined.map(\.peer.name))"])
        return NodeAPI.PendingJoins(requests: declined.map(Self.pending))
    }

    private static func code(_ text: String) throws -> JoinCode {
        guard let code = JoinCode(typed: text) else {
            throw NodeError.invalidRequest("'\(text)' is not a join code: six digits, as the asking device prints them (123 456)")
        }
        return code
    }

    private static func requested(_ request: JoinRequest, relay: URL, joined: NodeAPI.CircleStatus? = nil) -> NodeAPI.CircleRequested {
        NodeAPI.CircleRequested(
            circle: request.circle, relay: relay.absoluteString, name: request.peer.name, code: "\(request.code)", expires: request.expires,
            joined: joined)
    }

    private static func pending(_ request: JoinRequest) -> NodeAPI.PendingJoin {
        NodeAPI.PendingJoin(
            name: request.peer.name, signingKey: Hex.encode(request.peer.signing.bytes), encryptionKey: Hex.encode(request.peer.sealing.bytes),
            code: "\(request.code)", made: request.made, expires: request.expires)
    }

    func remove(_ request: NodeAPI.CircleRemove) async throws -> NodeAPI.CircleStatus {
        let engine = try member()
        try await engine.remove(request.peer)
        logger.info("member removed; new keys shared", metadata: ["peer": "\(request.peer)"])
        return try await circleStatus()
    }

    func leave(_ request: NodeAPI.CircleLeave) async throws -> NodeAPI.CircleStatus {
        let engine = try member()
        if !request.force { try requireFirstUnlock("leave its circle") }
        let circle = await engine.circle
        do {
            try await engine.leave(force: request.force)
        } catch RelayError.unreachable(let why) {
            throw CircleError(
                .relayUnreachable,
                "the relay cannot be reached (\(why)), so the others cannot be told; nothing was changed.")
        }
        progress.withLock { $0 = Progress() }
        logger.info("left the circle", metadata: ["circle": "\(circle)"])
        return try await circleStatus()
    }

    /// Empty in no circle; fails when the member's state cannot be read.
    func circleStatus() async throws -> NodeAPI.CircleStatus {
        if let unreadable = progress.withLock({ $0.engine == nil ? $0.unreadable : nil }) { throw unreadable }
        guard let engine else { return NodeAPI.CircleStatus(members: []) }
        return circleStatus(await engine.snapshot)
    }

    private func circleStatus(_ member: SyncEngine.Snapshot) -> NodeAPI.CircleStatus {
        NodeAPI.CircleStatus(
            circle: member.circle, removed: member.isMember ? nil : true,
            sealedUntilUnlock: device.lockState == .beforeFirstUnlock ? true : nil,
            relay: member.relay.absoluteString, name: member.name, epoch: member.epoch,
            members: member.members.map { peer in Self.peer(peer, isThisDevice: member.signingKey.map { peer.signing == $0 }) })
    }

    /// Fails with a sentence naming the fix while the device is before first unlock, when its
    /// sync identity cannot be read.
    private func requireFirstUnlock(_ action: String) throws {
        guard device.lockState == .beforeFirstUnlock else { return }
        throw KeychainError(
            .interactionNotAllowed,
            "\(device.info.name) has not been unlocked since it was powered on; "
                + "unlock it before it can \(action).")
    }

    /// After a reboot: the member's secrets leave memory, until the first unlock.
    func seal() async { await engine?.seal() }

    /// One exchange now, whatever the loop is doing; reports it with everything the node's
    /// own passes did since the last report (what was refused, above all). With `limit`, a
    /// relay that cannot be reached is asked again (sooner at first) until it answers or
    /// `limit` has passed, and the failure then says how long it was given.
    func syncNow(waitingUpTo limit: Duration? = nil) async throws -> SyncReport {
        let engine = try member()
        if let limit { try await exchangeWhileUnreachable(engine, upTo: limit) } else { _ = try await exchange(engine) }
        return progress.withLock { p in
            defer { p.unreported = SyncReport() }
            return p.unreported
        }
    }

    func syncStatus() async throws -> NodeAPI.SyncStatus {
        if let unreadable = progress.withLock({ $0.engine == nil ? $0.unreadable : nil }) { throw unreadable }
        let member = await engine?.snapshot
        let circle = member.map(circleStatus) ?? NodeAPI.CircleStatus(members: [])
        let local = try await engine?.localStatus() ?? (pending: 0, deviceBound: [])
        let waiting = member?.waitingCount ?? 0
        let received = Self.received(member?.received ?? AuthorChains(), members: circle.members)
        // sync.json is rewritten only by a pass that moved something.
        let lastChange = try? FileManager.default.attributesOfItem(atPath: DeviceLayout(root: device.directory).syncState.path)[.modificationDate] as? Date
        return progress.withLock { p in
            NodeAPI.SyncStatus(
                circle: circle.circle, sealedUntilUnlock: circle.sealedUntilUnlock, members: circle.members,
                lastExchange: p.lastExchange, lastChange: lastChange, lastReport: p.lastReport, lastError: p.lastError, pending: local.pending,
                waitingForUnlock: waiting, skippedDeviceBound: local.deviceBound, received: received)
        }
    }

    /// Syncs every `interval` while the node runs, backing off while the relay is unreachable.
    /// Before first unlock the member waits, sealed, and joins in at the first pass after.
    func run() async {
        var delay = Self.interval
        var backoff = Backoff(initial: Self.interval * 2, maximum: Self.maximumBackoff)
        while !Task.isCancelled {
            try? await clock.sleep(for: delay)
            guard let engine, device.lockState != .beforeFirstUnlock else { continue }
            do {
                // A pass that stopped at its bound goes on at once.
                delay = try await exchange(engine).more ? .zero : Self.interval
                backoff.reset()
            } catch {
                delay = backoff.next()
            }
        }
    }

    /// Passes until one reaches the relay, waiting longer between them (0.1 s to 2 s, on the
    /// node's clock); fails with `relayUnreachable` once `limit` has passed.
    private func exchangeWhileUnreachable(_ engine: SyncEngine, upTo limit: Duration) async throws {
        let lastFailure = LastFailure()
        let clock = clock
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(2))
                while true {
                    do {
                        _ = try await self.exchange(engine)
                        return
                    } catch RelayError.unreachable(let why) {
                        lastFailure.why.withLock { $0 = why }
                        try await clock.sleep(for: backoff.next())
                    }
                }
            }
            group.addTask {
                try await clock.sleep(for: limit)
                let why = lastFailure.why.withLock { $0 }.map { " (\($0))" } ?? ""
                let seconds = Int((limit / .seconds(1)).rounded(.up))
                throw CircleError(
                    .relayUnreachable,
                    "the relay at \(await engine.relay.absoluteString) did not answer within \(seconds) s\(why); "
                        + "the node keeps its writes and syncs once it is back.")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    /// Why the relay last could not be reached, for the failure that gives up on it.
    private final class LastFailure: Sendable {
        let why = Locked<String?>(nil)
    }

    private func exchange(_ engine: SyncEngine) async throws -> SyncReport {
        do {
            let report = try await engine.sync()
            progress.withLock {
                $0.lastExchange = Date()
                $0.lastReport = report
                $0.lastError = nil
                $0.unreported.absorb(report)
            }
            if report.pushed + report.applied > 0 || report.rejectedCount > 0 {
                logger.info("synced", metadata: ["pushed": "\(report.pushed)", "applied": "\(report.applied)", "rejected": "\(report.rejectedCount)"])
            }
            if report.resynced {
                logger.notice("resynced", metadata: ["deleted": "\(report.forgottenInResync)", "why": "the relay let go of deletions this node had not seen"])
            }
            // The first reasons only (a report keeps a few): junk on the relay cannot fill the log.
            for reason in report.rejected { logger.notice("refused", metadata: ["why": "\(reason)"]) }
            return report
        } catch {
            progress.withLock { $0.lastError = "\(error)" }
            logger.info("sync failed", metadata: ["error": "\(error)"])
            throw error
        }
    }

    private static func relayURL(_ text: String) throws -> URL {
        guard let address = RelayAddress(text), address.port != 0 else {
            throw NodeError.invalidRequest(RelayAddress.problem(with: text))
        }
        return address.url
    }

    /// What arrived of each author's batches, named by the members that still count.
    static func received(_ chains: AuthorChains, members: [NodeAPI.Peer]) -> [NodeAPI.SyncStatus.Received] {
        let names = Dictionary(members.map { ($0.signingKey, $0.name) }) { first, _ in first }
        return chains.chains.sorted { $0.key < $1.key }.map { key, chain in
            NodeAPI.SyncStatus.Received(
                name: names[key], signingKey: key, head: chain.head.sequence, headDigest: Hex.encode(chain.head.digest),
                missing: chain.missing.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" })
        }
    }

    static func peer(_ identity: PeerIdentity, isThisDevice: Bool?) -> NodeAPI.Peer {
        NodeAPI.Peer(
            name: identity.name, signingKey: Hex.encode(identity.signing.bytes), encryptionKey: Hex.encode(identity.sealing.bytes),
            isThisDevice: isThisDevice)
    }

    static func identity(_ peer: NodeAPI.Peer) throws -> PeerIdentity {
        guard let signing = Hex.decode(peer.signingKey), let sealing = Hex.decode(peer.encryptionKey),
            let signingKey = try? SigningPublicKey(bytes: signing), let sealingKey = try? SealingPublicKey(bytes: sealing)
        else {
            throw NodeError.invalidRequest("the peer's keys are not 32 bytes each in hex")
        }
        return PeerIdentity(name: peer.name, signing: signingKey, sealing: sealingKey)
    }
}
