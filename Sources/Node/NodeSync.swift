import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Logging
import Relay
import Sync
import Synchronization

/// The node's side of sync: the device's member engine when it is in a circle, the loop that
/// pushes and pulls on its own while the node runs, and what `sync status` reports.
final class NodeSync: Sendable {
    /// How often a member syncs on its own; after a failure it waits longer each time, up to
    /// `maximumBackoff`, and loses nothing meanwhile.
    static let interval = Duration.seconds(1)
    static let maximumBackoff = Duration.seconds(30)

    private struct Progress {
        var engine: SyncEngine?
        var lastExchange: Date?
        var lastReport: SyncReport?
        var lastError: String?
    }

    private let device: Device
    private let logger: Logger
    private let progress: Mutex<Progress>

    init(device: Device, logger: Logger) async throws {
        self.device = device
        self.logger = logger
        progress = Mutex(Progress(engine: try await SyncEngine.open(device: device, transport: { RelayClient(url: $0) })))
    }

    private var engine: SyncEngine? { progress.withLock { $0.engine } }

    func create(_ request: NodeAPI.CircleCreate) async throws -> NodeAPI.CircleStatus {
        let relay = try Self.relayURL(request.relay)
        let engine = try await SyncEngine.create(device: device, name: request.name ?? device.info.name, relay: relay,
                                                 transport: RelayClient(url: relay))
        progress.withLock { $0.engine = engine }
        let circle = await engine.circle
        logger.info("circle created", metadata: ["circle": "\(circle)"])
        return await circleStatus()
    }

    func identity() throws -> NodeAPI.Peer {
        Self.peer(try SyncEngine.peerIdentity(of: device, name: device.info.name), isThisDevice: true)
    }

    func vouch(_ request: NodeAPI.Vouch) async throws -> NodeAPI.Voucher {
        guard let engine else { throw CircleError.invalid("\(device.info.name) is in no circle, so it cannot vouch for another device.") }
        try await engine.vouch(for: try Self.identity(request.peer))
        logger.info("vouched", metadata: ["peer": "\(request.peer.name)"])
        return NodeAPI.Voucher(circle: await engine.circle, relay: await engine.relay.absoluteString)
    }

    func join(_ request: NodeAPI.CircleJoin) async throws -> NodeAPI.CircleStatus {
        let relay = try Self.relayURL(request.relay)
        let engine = try await SyncEngine.join(request.circle, device: device, name: request.name ?? device.info.name, relay: relay,
                                               transport: RelayClient(url: relay))
        progress.withLock { $0.engine = engine }
        logger.info("circle joined", metadata: ["circle": "\(request.circle)"])
        return await circleStatus()
    }

    func remove(_ request: NodeAPI.CircleRemove) async throws -> NodeAPI.CircleStatus {
        guard let engine else { throw CircleError.invalid("\(device.info.name) is in no circle.") }
        try await engine.remove(request.peer)
        logger.info("member removed; new keys shared", metadata: ["peer": "\(request.peer)"])
        return await circleStatus()
    }

    func circleStatus() async -> NodeAPI.CircleStatus {
        guard let engine else { return NodeAPI.CircleStatus(members: []) }
        let me = await engine.signingKey
        return NodeAPI.CircleStatus(circle: await engine.circle, relay: await engine.relay.absoluteString, name: await engine.name,
                                    epoch: await engine.epoch, members: await engine.members.map { Self.peer($0, isThisDevice: $0.signing == me) })
    }

    /// One exchange now, whatever the loop is doing.
    func syncNow() async throws -> SyncReport {
        guard let engine else { throw CircleError.invalid("\(device.info.name) is in no circle; `keyferry circle create` or `circle join` first.") }
        return try await exchange(engine)
    }

    func syncStatus() async throws -> NodeAPI.SyncStatus {
        let circle = await circleStatus()
        let local = try await engine?.localStatus() ?? (pending: 0, deviceBound: [])
        let waiting = await engine?.waitingCount ?? 0
        return progress.withLock { p in
            NodeAPI.SyncStatus(circle: circle.circle, members: circle.members, lastExchange: p.lastExchange, lastReport: p.lastReport,
                               lastError: p.lastError, pending: local.pending, waitingForUnlock: waiting, skippedDeviceBound: local.deviceBound)
        }
    }

    /// Syncs every `interval` while the node runs, backing off while the relay is unreachable.
    func run() async {
        var delay = Self.interval
        while !Task.isCancelled {
            try? await Task.sleep(for: delay)
            guard let engine else { continue }
            do {
                _ = try await exchange(engine)
                delay = Self.interval
            } catch {
                delay = min(delay * 2, Self.maximumBackoff)
            }
        }
    }

    private func exchange(_ engine: SyncEngine) async throws -> SyncReport {
        do {
            let report = try await engine.sync()
            progress.withLock { $0.lastExchange = Date(); $0.lastReport = report; $0.lastError = nil }
            if report.pushed + report.applied > 0 || !report.rejected.isEmpty {
                logger.info("synced", metadata: ["pushed": "\(report.pushed)", "applied": "\(report.applied)", "rejected": "\(report.rejected.count)"])
            }
            for reason in report.rejected { logger.notice("refused", metadata: ["why": "\(reason)"]) }
            return report
        } catch {
            progress.withLock { $0.lastError = "\(error)" }
            logger.info("sync failed", metadata: ["error": "\(error)"])
            throw error
        }
    }

    private static func relayURL(_ text: String) throws -> URL {
        guard let url = URL(string: text), url.scheme == "http", url.host != nil else {
            throw CircleError.invalid("the relay address \(text) is not an http://HOST:PORT URL")
        }
        return url
    }

    static func peer(_ identity: PeerIdentity, isThisDevice: Bool?) -> NodeAPI.Peer {
        NodeAPI.Peer(name: identity.name, signingKey: Hex.encode(identity.signing.bytes), encryptionKey: Hex.encode(identity.sealing.bytes),
                     isThisDevice: isThisDevice)
    }

    static func identity(_ peer: NodeAPI.Peer) throws -> PeerIdentity {
        guard let signing = Hex.decode(peer.signingKey), let sealing = Hex.decode(peer.encryptionKey),
              let signingKey = try? SigningPublicKey(bytes: signing), let sealingKey = try? SealingPublicKey(bytes: sealing) else {
            throw NodeAPI.Failure(request: "the peer's keys are not 32 bytes each in hex")
        }
        return PeerIdentity(name: peer.name, signing: signingKey, sealing: sealingKey)
    }
}
