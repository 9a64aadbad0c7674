public import Foundation
public import KeychainModel
import KeyferryHTTP
import KeyferryThreads

/// Calls a running node's control API over its socket. A failure comes back as the error the
/// node threw (`KeychainError` with Apple's status, `DeviceError`, `CircleError`, `ArchiveError`,
/// `RelayError`, `NodeError`), or a `NodeError` of the client's own when no node answers.
public struct NodeClient: Sendable {
    public let paths: NodePaths
    /// How long one call may take before the node counts as not answering.
    private let timeout: Duration

    public init(directory: URL, timeout: Duration = .seconds(60)) {
        paths = NodePaths(directory: directory)
        self.timeout = timeout
    }

    public func status() async throws -> NodeAPI.NodeStatus {
        try await get(.status)
    }

    public func apps() async throws -> [AppManifest] {
        try await get(.apps)
    }

    /// One GET: the route's answer.
    public func get<Answer>(_ route: NodeAPI.Route<NodeAPI.Empty, Answer>) async throws -> Answer {
        try await call(route, get: true, body: Optional<NodeAPI.Empty>.none)
    }

    /// One POST: `body` as JSON in, the route's answer out.
    public func call<Body, Answer>(_ route: NodeAPI.Route<Body, Answer>, _ body: Body) async throws -> Answer {
        try await call(route, get: false, body: body)
    }

    /// A POST whose answer carries nothing.
    public func send<Body>(_ route: NodeAPI.Route<Body, NodeAPI.Empty>, _ body: Body) async throws {
        _ = try await call(route, get: false, body: body)
    }

    private func call<Body, Answer>(_ route: NodeAPI.Route<Body, Answer>, get: Bool, body: Body?) async throws -> Answer {
        // A dead node leaves its socket behind; without this check the client would retry it
        // until the timeout.
        guard paths.isHeld else {
            try DeviceLayout(root: paths.directory).requireDevice()
            throw NodeError.notRunning(paths.directory)
        }
        let request = try request(route, get: get, body: body.map { try NodeAPI.encoder.encode($0) })
        let response: UnixSocketHTTP.Response
        do {
            response = try await UnixSocketHTTP.exchange(socketPath: paths.socket.path, request)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw unanswered(error)
        }
        return try answer(to: route, response)
    }
}

extension NodeClient {
    /// Waits until this node's request to join (`circle/request`) is answered: the circle once
    /// a member's voucher was checked and the entry published; a decline or an expiry throws.
    /// The node reads the relay each time it is asked, at intervals growing from 0.2 s to 2 s.
    public func joinedCircle(_ requested: NodeAPI.CircleRequested) async throws -> NodeAPI.CircleStatus {
        var requested = requested
        var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(2))
        while true {
            if let joined = requested.joined { return joined }
            try await Task.sleep(for: backoff.next())
            requested = try await call(.circleRequestAnswer, NodeAPI.Empty())
        }
    }

    /// Brings this node into the circle of `sponsor`'s node. This node first says whether it
    /// can join at all (its identity is refused when it is in a circle, or before first
    /// unlock); the sponsor then signs an entry admitting it and seals it a share of the keys,
    /// publishing nothing; this node checks both against the relay and publishes the entry.
    /// A join that fails anywhere leaves the circle as it was.
    /// `relay`: the relay this node syncs through, when not the sponsor's: another relay
    /// serving the same database (`relay serve --database`), nearer this node.
    public func joinCircle(sponsor: NodeClient, name: String? = nil, relay: String? = nil) async throws -> NodeAPI.CircleStatus {
        var peer: NodeAPI.Peer = try await get(.circleIdentity)
        if let name {
            guard !name.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw NodeError(.invalidRequest, "a member needs a name the others can read; without one, it goes by the device's.")
            }
            peer.name = name
        }
        var voucher: NodeAPI.Voucher = try await sponsor.call(.circleVouch, NodeAPI.Vouch(peer: peer))
        if let relay { voucher.relay = relay }
        let joined: NodeAPI.CircleStatus = try await call(.circleJoin, voucher)
        // The joiner published its entry; the sponsor reads it now rather than at its next pass.
        _ = try? await sponsor.call(.syncNow, NodeAPI.SyncNow())
        return joined
    }
}

extension NodeClient {
    /// One POST, waiting on the calling thread: for synchronous APIs such as Keychain Services,
    /// which block their caller as `securityd` does on a device. The request runs on NIO's
    /// event loops, never on Swift's cooperative pool, so a caller blocked here cannot
    /// starve the work it waits for.
    public func callSynchronously<Body, Answer>(_ route: NodeAPI.Route<Body, Answer>, _ body: Body) throws -> Answer {
        try callSynchronously(route, body: try NodeAPI.encoder.encode(body))
    }

    /// One GET, waiting on the calling thread.
    public func getSynchronously<Answer>(_ route: NodeAPI.Route<NodeAPI.Empty, Answer>) throws -> Answer {
        try callSynchronously(route, body: nil)
    }

    private func callSynchronously<Body, Answer>(_ route: NodeAPI.Route<Body, Answer>, body: Data?) throws -> Answer {
        let request = try request(route, get: body == nil, body: body)
        let response: UnixSocketHTTP.Response
        do {
            response = try UnixSocketHTTP.exchangeWaiting(socketPath: paths.socket.path, request)
        } catch {
            guard paths.isHeld else { throw NodeError.notRunning(paths.directory) }
            throw unanswered(error)
        }
        return try answer(to: route, response)
    }

    /// The exchange that calls `route`: an answer may be as large as a listing of many items.
    private func request(_ route: NodeAPI.Route<some Any, some Any>, get: Bool, body: Data?) throws -> UnixSocketHTTP.Request {
        try paths.requireSocketPathFits()
        return UnixSocketHTTP.Request(
            method: get ? .get : .post, uri: "/\(NodeAPI.version)/\(route.path)", body: body.map { [UInt8]($0) }, timeout: timeout,
            maximumResponseBytes: 64 << 20)
    }

    private func unanswered(_ error: any Error) -> NodeError {
        let why = ConnectionFailure.reason(error) ?? "\(error)"
        return NodeError(.unanswered, "the node for \(paths.directory.path) did not answer (\(why)); its log is \(paths.log.path).")
    }

    /// The answer of a 200, or the failure the node sent back, typed.
    private func answer<Body, Answer>(to route: NodeAPI.Route<Body, Answer>, _ response: UnixSocketHTTP.Response) throws -> Answer {
        let bytes = Data(response.body)
        guard response.status == 200 else {
            guard let failure = try? NodeAPI.decoder.decode(NodeAPI.Failure.self, from: bytes) else {
                throw NodeError(.unanswered, "the node answered \(response.statusLine) without an explanation; its log is \(paths.log.path).")
            }
            throw failure.error
        }
        do {
            return try NodeAPI.decoder.decode(Answer.self, from: bytes)
        } catch {
            throw NodeError(.incompatible, "the node's answer to \(route.path) is not what this keyferry expects (\(error)); is it a different version?")
        }
    }
}
