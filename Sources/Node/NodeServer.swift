import Backup
package import Foundation
package import Hummingbird
import KeychainModel
import KeychainStore
import KeyferrySystem
import KeyferryThreads
import Logging
import NIOCore
import NodeControl
import PhoneBackup
import ServiceLifecycle
import Survival
import SyncWire

/// A powered-on device serving the control API on its socket until SIGTERM or SIGINT, which
/// power it off. The class keys live in this process only.
package enum NodeServer {
    /// A UserDefaults value as `app defaults` shows it and `--set --type` takes it back: text as
    /// is, data as `hex:`, a date in ISO 8601, the rest as Swift prints it.
    static func shown(_ value: Any) -> String {
        switch value {
        case let text as String: text
        case let data as Data: "hex:" + Hex.encode(data)
        case let date as Date: date.formatted(.iso8601)
        default: "\(value)"
        }
    }

    /// Runs in the foreground: `keyferry node start` launches this in a detached process.
    package static func run(directory: URL) async throws {
        let paths = NodePaths(directory: directory)
        // Powered on, the device is this process's until it powers off: a second node, a
        // restore or an offline read of it fails meanwhile. Real time, until `device clock
        // --advance` moves it on.
        let device = try Device.powerOn(at: directory, clock: AdvancingClock())
        defer { device.powerOff() }
        // What a survival matrix cut short left inside it.
        Survival.removeScratch(of: directory)
        let logger = Logger(label: "keyferry.node") { _ in FileLogHandler(url: paths.log) }
        // A socket left by a killed node: safe to remove, since this process holds the lock.
        try? FileManager.default.removeItem(at: paths.socket)

        let sync = await NodeSync(device: device, logger: logger)
        // The server, the grace-period settler and the sync loop run as one service group: one
        // SIGTERM or SIGINT stops them all, and the device powers off after.
        let app = Application(
            router: router(device: device, sync: sync, logger: logger),
            configuration: .init(address: .unixDomainSocket(path: paths.socket.path), serverName: "keyferry-node"),
            services: [GracePeriodSettler(device: device, logger: logger), SyncLoop(sync: sync)],
            onServerRunning: { _ in
                try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: paths.socket.path)
                logger.info("node up", metadata: ["device": "\(device.info.name)", "pid": "\(ProcessInfo.processInfo.processIdentifier)"])
            },
            logger: logger)

        try await ProcessControl.runUntilInterrupted([app], logger: logger)
        try? FileManager.default.removeItem(at: paths.socket)
        logger.info("node down")
    }

    /// Every route of the control API on `device`: what the node serves on its socket, and what
    /// the route tests call in-process.
    static func router(device: Device, sync: NodeSync, logger: Logger) -> Router<NodeRequestContext> {
        let router = Router(context: NodeRequestContext.self)
        routes(router, device: device, sync: sync, logger: logger)
        syncRoutes(router, sync: sync, logger: logger)
        return router
    }

    private static func routes(_ router: Router<NodeRequestContext>, device: Device, sync: NodeSync, logger: Logger) {
        typealias API = NodeAPI
        // A route whose work is a call of the device's, through its door for calls.
        func call<Body, Answer>(_ route: API.Route<Body, Answer>, _ work: @escaping @Sendable (Body) throws -> Answer) {
            post(router, route, logger) { request in try await device.run { _ in try work(request) } }
        }
        // How far a backup in progress has come, for `status` to report while it runs.
        let backupProgress = Locked<API.Progress?>(nil)
        get(router, .status, logger) {
            API.NodeStatus(
                pid: ProcessInfo.processInfo.processIdentifier, device: try await device.run { try $0.status() },
                backupProgress: backupProgress.withLock { $0 })
        }
        post(router, .reboot, logger) { _ in
            try await device.run { try $0.reboot() }
            // What the member unsealed leaves memory with the class keys.
            await sync.seal()
            logger.info("rebooted: before first unlock")
            return API.Empty()
        }
        call(.unlock) {
            try device.unlock(passcode: $0.passcode)
            return API.Empty()
        }
        call(.lock) {
            try device.lock(immediately: $0.immediately)
            return API.Empty()
        }
        call(.passcode) { request in
            if request.remove {
                guard let current = request.current else { throw NodeError.invalidRequest("removing the passcode needs the current one.") }
                try device.removePasscode(current: current)
            } else {
                guard let new = request.new else { throw NodeError.invalidRequest("give the new passcode, or ask to remove it.") }
                try device.setPasscode(new, current: request.current)
            }
            return API.Empty()
        }
        call(.security) { request in
            if let away = request.away { try device.setAway(away) }
            if let mode = request.stolenDeviceProtection { try device.setStolenDeviceProtection(mode) }
            return API.Empty()
        }
        call(.biometry) { request in
            switch request.action {
            case .enroll: try device.enrollBiometry()
            case .change: try device.changeBiometryEnrollment()
            case .remove: try device.removeBiometry()
            }
            return API.Empty()
        }
        get(router, .apps, logger) { try await device.run { try $0.installedApps() } }
        call(.install) {
            try device.install($0)
            return API.Empty()
        }
        call(.uninstall) {
            try device.uninstall(bundleID: $0.bundleID)
            return API.Empty()
        }
        call(.defaults) { request in
            let sandbox = try device.sandbox(for: request.bundleID, group: request.group)
            for (key, value) in request.set.sorted(by: { $0.key < $1.key }) { try sandbox.set(value, forKey: key) }
            return try sandbox.defaults().mapValues(Self.shown)
        }
        call(.defaultsPlist) { request in
            let sandbox = try device.sandbox(for: request.bundleID, group: request.group)
            if let set = request.set {
                guard let entries = try? PropertyListSerialization.propertyList(from: set, format: nil) as? [String: Any] else {
                    throw NodeError.invalidRequest("'set' is not a property list of entries.")
                }
                for (key, value) in entries.sorted(by: { $0.key < $1.key }) { try sandbox.set(value, forKey: key) }
            }
            for key in request.remove { try sandbox.set(nil, forKey: key) }
            guard sandbox.defaultsAreReadable else { return API.DefaultsPlistContents(plist: nil) }
            return API.DefaultsPlistContents(plist: try PropertyListSerialization.data(fromPropertyList: try sandbox.defaults(), format: .binary, options: 0))
        }
        call(.files) { request in
            try device.sandbox(for: request.bundleID, group: request.group).files().map {
                API.FileInfo(path: $0.path, protection: $0.protection, bytes: $0.bytes)
            }
        }
        call(.file) { request in
            let sandbox = try device.sandbox(for: request.bundleID, group: request.group)
            if request.remove == true {
                guard request.contents == nil else { throw NodeError.invalidRequest("a file is either written or removed, not both.") }
                try sandbox.removeFile(request.path)
                return API.FileContents(path: request.path, contents: nil)
            }
            if let contents = request.contents {
                try sandbox.writeFile(request.path, contents, protection: request.protection ?? .completeUntilFirstUserAuthentication)
            }
            return API.FileContents(path: request.path, contents: try sandbox.readFile(request.path))
        }
        call(.add) { request in
            let keychain = try device.keychain(for: request.app)
            guard let privateKey = request.privateKey else { return API.Items(items: [try keychain.add(request.item)]) }
            try keychain.addIdentity(certificate: request.item, privateKey: privateKey)
            return API.Items(items: [])
        }
        call(.copy) { request in
            var damaged: [DamagedItem] = []
            let items = try device.keychain(for: request.app).copy(request.query, damaged: &damaged)
            return API.Items(items: items, damaged: damaged)
        }
        call(.copyMany) { request in
            let keychain = try device.keychain(for: request.app)
            return API.FoundMany(results: request.queries.map { query in API.Found(Result { try keychain.copy(query) }) })
        }
        call(.update) { request in
            API.Changed(count: try device.keychain(for: request.app).update(request.query, with: request.changes))
        }
        call(.delete) { request in
            API.Changed(count: try device.keychain(for: request.app).delete(request.query))
        }
        call(.list) { request in
            try (request.app.map(device.keychain(for:)) ?? device.deviceKeychain).list()
        }
        // A caller that goes away (Ctrl-C, a timeout) takes its backup with it: the archive is
        // dropped unfinished, so that none appears after its command has failed.
        post(router, .backup, logger) { request in
            guard request.path.hasPrefix("/") else { throw NodeError.invalidRequest("the archive path must be absolute.") }
            let mode: ArchiveWriter.Mode = request.password.map { .encrypted(password: Data($0.utf8)) } ?? .unencrypted
            defer { backupProgress.withLock { $0 = nil } }
            let manifest = try await device.longJob { device, checkCancellation in
                try DeviceBackup.create(from: device, to: URL(fileURLWithPath: request.path), mode: mode) { done, total in
                    try checkCancellation()
                    backupProgress.withLock { $0 = API.Progress(done: done, total: total) }
                }
            }
            logger.info("backup written", metadata: ["mode": "\(request.password == nil ? "unencrypted" : "encrypted")"])
            return manifest
        }
        post(router, .phoneBackup, logger) { request in
            guard request.path.hasPrefix("/") else { throw NodeError.invalidRequest("the backup path must be absolute.") }
            let options = PhoneBackupWriter.Options(password: request.password.map { Data($0.utf8) }, dataProtectionRounds: request.rounds ?? 10_000_000)
            defer { backupProgress.withLock { $0 = nil } }
            let summary = try await device.longJob { device, checkCancellation in
                try PhoneBackupWriter.create(from: device, to: URL(fileURLWithPath: request.path), options: options) { step in
                    try checkCancellation()
                    backupProgress.withLock {
                        switch step {
                        case .derivingKey(let rounds):
                            $0 = API.Progress(done: 0, total: 0, stage: "deriving the password's key (\(rounds.formatted()) rounds of PBKDF2)")
                        case .writing(let done, let total): $0 = API.Progress(done: done, total: total)
                        }
                    }
                }
            }
            logger.info("iOS backup written", metadata: ["encrypted": "\(summary.encrypted)"])
            return summary
        }
        post(router, .transfer, logger) { request in
            guard request.target.hasPrefix("/") else { throw NodeError.invalidRequest("the target path must be absolute.") }
            let target = URL(fileURLWithPath: request.target)
            try DeviceTransfer.requireAnotherDevice(target, than: device)
            let report = try await device.longJob { device, checkCancellation in
                try DeviceTransfer.transfer(from: device, to: target, passcode: request.passcode) { _, _, _ in try checkCancellation() }
            }
            logger.info("transferred", metadata: ["items": "\(report.restoredCount)"])
            return report
        }
        post(router, .survival, logger) { request in
            let scratch = Survival.scratch(of: device.directory)
            return try await Survival.matrix(of: device, options: .init(app: request.app, passcode: request.passcode, scratch: scratch))
        }
        post(router, .survivalAgainstSimulator, logger) { request in
            let scratch = Survival.scratch(of: device.directory)
            return try await Survival.compareWithSimulator(device, options: .init(app: request.app, passcode: request.passcode, scratch: scratch))
        }
        call(.clock) { request in
            if request.advance > 0 {
                try device.advanceClock(by: request.advance)
                logger.info("clock advanced", metadata: ["seconds": "\(request.advance)"])
            }
            return API.ClockState(now: device.now, advanced: device.clockAdvance)
        }
    }

    private static func syncRoutes(_ router: Router<NodeRequestContext>, sync: NodeSync, logger: Logger) {
        post(router, .circleCreate, logger) { try await sync.create($0) }
        get(router, .circleIdentity, logger) { try await sync.identity() }
        post(router, .circleVouch, logger) { try await sync.vouch($0) }
        post(router, .circleJoin, logger) { try await sync.join($0) }
        post(router, .circleRequest, logger) { try await sync.request($0) }
        post(router, .circleRequestAnswer, logger) { _ in try await sync.requestAnswer() }
        get(router, .circleRequests, logger) { try await sync.joinRequests() }
        post(router, .circleApprove, logger) { try await sync.approve($0) }
        post(router, .circleDecline, logger) { try await sync.decline($0) }
        post(router, .circleRemove, logger) { try await sync.remove($0) }
        post(router, .circleLeave, logger) { try await sync.leave($0) }
        get(router, .circleStatus, logger) { try await sync.circleStatus() }
        post(router, .syncNow, logger) { try await sync.syncNow(waitingUpTo: try Self.duration(seconds: $0.timeout)) }
        get(router, .syncStatus, logger) { try await sync.syncStatus() }
    }

    /// A request's number of seconds as a duration: positive, at most a day.
    private static func duration(seconds: Double?) throws -> Duration? {
        guard let seconds else { return nil }
        guard seconds > 0, seconds <= 86_400 else { throw NodeError.invalidRequest("a timeout is a number of seconds above 0, a day at most.") }
        return .milliseconds(Int64(seconds * 1000))
    }

    private static func path(_ route: NodeAPI.Route<some Any, some Any>) -> RouterPath { RouterPath("/\(NodeAPI.version)/\(route.path)") }

    /// Registers one GET route: act, answer JSON.
    private static func get<Answer>(
        _ router: Router<NodeRequestContext>, _ route: NodeAPI.Route<NodeAPI.Empty, Answer>, _ logger: Logger,
        _ action: @escaping @Sendable () async throws -> Answer
    ) {
        router.get(path(route)) { _, _ in try await reply(logger, route.path) { try await action() } }
    }

    /// Registers one POST route: decode the body, act, answer JSON. Bodies are never logged,
    /// since they carry secrets and passcodes. For a route `cancelledWhenCallerLeaves`, the
    /// action's task is cancelled if the connection closes before it answers.
    private static func post<Body, Answer>(
        _ router: Router<NodeRequestContext>, _ route: NodeAPI.Route<Body, Answer>, _ logger: Logger,
        _ action: @escaping @Sendable (Body) async throws -> Answer
    ) {
        let name = route.path
        router.post(path(route)) { request, context in
            guard route.cancelledWhenCallerLeaves else { return try await handle(request, context) }
            return try await request.body.consumeWithCancellationOnInboundClose { body in
                try await handle(Request(head: request.head, body: body), context)
            }
        }
        @Sendable func handle(_ request: Request, _ context: NodeRequestContext) async throws -> Response {
            let decoded: Body
            do {
                decoded = try await request.decode(as: Body.self, context: context)
            } catch is NIOTooManyBytesError {
                return failure(
                    logger, name,
                    NodeError.invalidRequest(
                        "the \(name) request is larger than a node accepts (\(byteSize(context.maxUploadSize))); a secret holds up to \(byteSize(NewItem.maximumDataBytes))."
                    ))
            } catch let error as HTTPError {
                return failure(
                    logger, name, NodeError.invalidRequest("the \(name) request body is not valid: \(error.body ?? "not the control API's JSON")"))
            } catch {
                return failure(logger, name, NodeError.invalidRequest("the \(name) request body is not the control API's JSON."))
            }
            return try await reply(logger, name) { try await action(decoded) }
        }
    }

    private static func reply(_ logger: Logger, _ route: String, _ action: () async throws -> some Encodable) async throws -> Response {
        do {
            let body = try NodeAPI.encoder.encode(try await action())
            logger.debug("\(route): ok")
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        } catch {
            return failure(logger, route, error)
        }
    }

    private static func failure(_ logger: Logger, _ route: String, _ error: any Error) -> Response {
        let failure = NodeAPI.Failure(error)
        // The code only: messages may name an account or a service. A failure Keyferry did not
        // foresee is logged whole, its cause with it, since its answer holds none of it.
        if let failure = failure.error as? DeviceError, failure.code == .internal {
            logger.error("\(route): \(failure.detailedDescription)")
        } else {
            logger.info("\(route): \(failure.error.domain) \(failure.error.codeName)")
        }
        let status: HTTPResponse.Status =
            switch failure.error {
            case is KeychainError: .conflict
            case let error as NodeError where error.code == .invalidRequest: .badRequest
            case is RelayError: .badGateway
            default: .unprocessableContent
            }
        let body = (try? NodeAPI.encoder.encode(failure)) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Requests to a node: large enough for the largest secret as base64 in JSON.
package struct NodeRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    package init(source: Source) { coreContext = .init(source: source) }
    package var maxUploadSize: Int { 4 * NewItem.maximumDataBytes }
}

/// The lock-state machine settles lazily; this makes the grace period end on time even when
/// nobody asks, so class A keys really leave memory.
private struct GracePeriodSettler: Service {
    let device: Device
    let logger: Logger
    var clock: any Clock<Duration> = ContinuousClock()

    func run() async {
        await cancelWhenGracefulShutdown {
            var wasAvailable = device.isProtectedDataAvailable
            while !Task.isCancelled {
                try? await clock.sleep(for: .milliseconds(250))
                let available = device.isProtectedDataAvailable
                if wasAvailable && !available { logger.info("class A keys discarded") }
                wasAvailable = available
            }
        }
    }
}

/// The member's sync passes, every second while the node runs (`NodeSync.run`).
private struct SyncLoop: Service {
    let sync: NodeSync

    func run() async {
        await cancelWhenGracefulShutdown { await sync.run() }
    }
}
