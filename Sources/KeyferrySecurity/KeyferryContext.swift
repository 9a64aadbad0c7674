public import Foundation
import KeychainModel
public import KeychainStore
import KeyferryThreads
import NodeControl

/// The device and the app that Keychain Services calls act as. On a device the calling app is
/// implicit; here a context names it, found in this order:
/// - `context.run { ... }`: the calls of one scope and of the tasks it starts, so tests running
///   side by side each act on their own device;
/// - `KeyferryContext.use(context)` in test setup: every other call of the process;
/// - `KEYFERRY_DEVICE` (a device directory) and `KEYFERRY_APP` (a bundle ID) in the environment,
///   with `KEYFERRY_PASSCODE` when the device has one, read at the first call.
///
/// A device a node runs is called over the node's socket; a directory no node runs is powered
/// on in this process (and unlocked with the passcode) until the context closes.
public final class KeyferryContext: Sendable {
    /// The calling app's bundle ID.
    public let app: String
    let backend: any KeychainBackend
    /// Answers prompts that ask for the device passcode.
    var passcode: String? { currentPasscode() }
    private let currentPasscode: @Sendable () -> String?
    /// Where the traps its calls fall into are recorded: the device's audit log.
    public let audit: AuditLog
    private let local: Device?
    private let state = Locked(State())

    struct State {
        var user = SimulatedUser()
        var lastFailure: KeychainError?
        var traps = TrapDetector()
        /// Statuses the test asked the next calls of each function to fail with.
        var faults: [SecItemFunction: [OSStatus]] = [:]
        var beforeEachCall: (@Sendable (SecItemFunction) -> OSStatus?)?
        /// What `os_log` wrote in this context.
        var logged: [String] = []
        var latency = Latency()
        /// UserDefaults' registration domain, by app group ("" for the app's own).
        var registeredDefaults: [String: RegisteredDefaults] = [:]
    }

    /// Property-list values, which app code hands over and never changes in place.
    struct RegisteredDefaults: @unchecked Sendable {
        var values: [String: Any] = [:]
    }

    /// The device at `directory`, as `app`. The app must be installed there.
    public convenience init(device directory: URL, app: String, passcode: String? = nil) throws {
        let client = NodeClient(directory: directory)
        if (try? client.getSynchronously(.status) as NodeAPI.NodeStatus) != nil {
            self.init(backend: NodeBackend(client: client), local: nil, app: app, passcode: { passcode })
        } else {
            // Held by this process until it is done with it: no node starts on it meanwhile.
            let local = try Device.powerOn(at: directory)
            do {
                if local.lockState != .unlocked { try local.unlock(passcode: passcode) }
            } catch {
                local.powerOff()
                throw error
            }
            self.init(backend: InProcessBackend(device: local), local: local, app: app, passcode: { passcode })
        }
        _ = try backend.status()
    }

    /// A device already powered on in this process (its owner powers it off): for a tool that
    /// also drives the device through the typed API, such as a benchmark of the two.
    public convenience init(device: Device, app: String, passcode: String?) {
        self.init(device: device, app: app, passcode: { passcode })
    }

    /// A device already powered on in this process, whose passcode may change.
    package convenience init(device: Device, app: String, passcode: @escaping @Sendable () -> String?) {
        self.init(backend: InProcessBackend(device: device), local: nil, app: app, passcode: passcode)
    }

    private init(backend: any KeychainBackend, local: Device?, app: String, passcode: @escaping @Sendable () -> String?) {
        self.backend = backend
        self.audit = AuditLog(device: backend.directory)
        self.local = local
        self.app = app
        self.currentPasscode = passcode
    }

    /// Records what the audit still holds back, and powers off a device this context powered
    /// on; a node's device is left running.
    public func close() {
        flushAudit()
        local?.powerOff()
    }

    // MARK: Which context

    @TaskLocal private static var scoped: KeyferryContext?
    private static let processWide = Locked<KeyferryContext?>(nil)

    /// Runs `body` with this context for its calls and the tasks it starts.
    public func run<T>(_ body: () throws -> T) rethrows -> T {
        try Self.$scoped.withValue(self, operation: body)
    }

    public func run<T>(_ body: () async throws -> T) async rethrows -> T {
        try await Self.$scoped.withValue(self, operation: body)
    }

    /// The context of every call outside `run`; nil falls back to the environment.
    public static func use(_ context: KeyferryContext?) {
        processWide.withLock { $0 = context }
    }

    /// The context a call made here would act in.
    public static var current: KeyferryContext? {
        scoped ?? processWide.withLock { $0 } ?? (try? environment.get())
    }

    private static let environment: Result<KeyferryContext, KeychainError> = {
        let variables = ProcessInfo.processInfo.environment
        guard let directory = variables["KEYFERRY_DEVICE"], let app = variables["KEYFERRY_APP"] else {
            return .failure(
                KeychainError(
                    .notAvailable,
                    "no device for Keychain Services calls: set KEYFERRY_DEVICE and KEYFERRY_APP, or use KeyferryContext in the test's setup."))
        }
        do {
            let context = try KeyferryContext(device: URL(fileURLWithPath: directory), app: app, passcode: variables["KEYFERRY_PASSCODE"])
            func milliseconds(_ name: String) -> Duration { .milliseconds(variables[name].flatMap { Int($0) }.map { max($0, 0) } ?? 0) }
            context.simulateLatency(Latency(call: milliseconds("KEYFERRY_CALL_LATENCY_MS"), prompt: milliseconds("KEYFERRY_PROMPT_LATENCY_MS")))
            return .success(context)
        } catch {
            return .failure(KeychainError(.notAvailable, "KEYFERRY_DEVICE=\(directory) cannot be used: \(error)"))
        }
    }()

    /// Why no context is found, for the status of a call made without one.
    static var missing: KeychainError {
        if case .failure(let error) = environment { return error }
        return KeychainError(.notAvailable, "no device for Keychain Services calls.")
    }

    // MARK: The simulated user

    /// What the user does at the next `count` prompts, before going back to `always`.
    public func userWill(_ response: UserResponse, times count: Int = 1) {
        state.withLock { $0.user.queue(response, count) }
    }

    /// What the user does at every prompt nothing else was queued for. At first they cooperate:
    /// a matching face or finger when biometry is enrolled, else the device passcode.
    public func userWillAlways(_ response: UserResponse) {
        state.withLock { $0.user.always = response }
    }

    /// The responses for one call that may prompt: the next queued one, or the standing one.
    func responses() -> [AuthenticationResponse] {
        let next = state.withLock { $0.user.next() }
        return next.map { [$0.response(passcode: passcode)] }
            ?? [.biometryMatch] + (passcode.map { [.passcode($0)] } ?? [])
    }

    // MARK: Faults

    /// The next `count` calls of `function` in this context fail with `status`, doing nothing:
    /// how a test sees its code face a locked device (`errSecInteractionNotAllowed`), a full
    /// disk (`errSecIO`) or a duplicate, whatever state the device is in.
    public func failNext(_ function: SecItemFunction, times count: Int = 1, with status: OSStatus) {
        state.withLock { $0.faults[function, default: []] += Array(repeating: status, count: max(count, 0)) }
    }

    /// The status a call fails with before doing anything: a kill, or a fault the test asked for.
    func injectedStatus(for function: SecItemFunction) -> OSStatus? {
        if let hook = state.withLock({ $0.beforeEachCall }), let status = hook(function) { return status }
        return state.withLock { state in
            guard var queued = state.faults[function], !queued.isEmpty else { return nil }
            let status = queued.removeFirst()
            state.faults[function] = queued
            return status
        }
    }

    /// Runs before every call of this context (to stop an app between two calls); a status
    /// it returns is the call's, and the call does nothing.
    package func beforeEachCall(_ hook: (@Sendable (SecItemFunction) -> OSStatus?)?) {
        state.withLock { $0.beforeEachCall = hook }
    }

    // MARK: Audit

    func observe(_ call: ObservedCall) {
        var found: [TrapRecord] = []
        state.withLock { state in
            state.traps.observe(call) { trap, site, detail in found.append(record(trap, site, detail)) }
        }
        audit.append(found)
    }

    /// Records an add whose duplicate is still waiting to be handled: its code has stopped
    /// calling, so it never will be. Reading the audit in a test does this first.
    public func flushAudit() {
        var found: [TrapRecord] = []
        state.withLock { state in
            state.traps.flush { trap, site, detail in found.append(record(trap, site, detail)) }
        }
        audit.append(found)
    }

    private func record(_ trap: KeychainTrap, _ site: Site, _ detail: String?) -> TrapRecord {
        TrapRecord(trap: trap, function: site.function, file: "\(site.file)", line: site.line, app: app, detail: detail, at: Date())
    }

    // MARK: Identities

    /// The private key of an identity found by a search: the key item whose application label
    /// the identity carries (its certificate's public key hash), in its group.
    func privateKey(of identity: ItemRecord) throws(KeychainError) -> SecKey {
        guard let label = identity.attributes[.applicationLabel] else {
            throw KeychainError(.internalError, "the identity was read without its private key's application label.")
        }
        var query = ItemQuery(.key, attributes: [.applicationLabel: label, .keyClass: .number(1)], accessGroup: identity.accessGroup, matchLimit: .one)
        query.synchronizable = .any
        query.returning = [.data, .attributes]
        query.authentication = authentication(query.authentication)
        do {
            guard let record = try backend.copy(query, app: app).first else { throw KeychainError(.itemNotFound, "the identity's private key is gone.") }
            return try SecKey(record: record)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.notAvailable, "\(error)")
        }
    }

    // MARK: Latency

    /// How long calls keep their caller waiting on a device.
    public struct Latency: Sendable, Equatable {
        /// Each Keychain Services call: securityd's IPC and the database behind it.
        public var call: Duration
        /// A prompt on top of that: the user looking at Face ID, or typing the passcode.
        public var prompt: Duration

        public init(call: Duration = .zero, prompt: Duration = .zero) {
            self.call = call
            self.prompt = prompt
        }
    }

    /// Makes every Keychain Services call of this context block its caller for `call`, and a
    /// call that prompts (or `LAContext.evaluatePolicy`) for `prompt` more, as on a device,
    /// where each call is an IPC round trip and a biometric prompt takes seconds: code that
    /// calls on the main actor then freezes for that long, and the audit names the call
    /// (`mainThreadCall`). None by default; `KEYFERRY_CALL_LATENCY_MS` and
    /// `KEYFERRY_PROMPT_LATENCY_MS` set it for a context made from the environment.
    public func simulateLatency(_ latency: Latency) {
        state.withLock { $0.latency = latency }
    }

    public var latency: Latency { state.withLock { $0.latency } }

    /// Blocks the calling thread, as the call it stands for blocks it on a device: this is the
    /// wait app code must keep off its main actor.
    func wait(_ duration: Duration) {
        guard duration > .zero else { return }
        Thread.sleep(forTimeInterval: Double(duration.milliseconds) / 1000)
    }

    // MARK: UserDefaults

    func registeredDefaults(group: String?) -> [String: Any] { state.withLock { $0.registeredDefaults[group ?? ""] }?.values ?? [:] }

    func register(_ defaults: [String: Any], group: String?) {
        let added = RegisteredDefaults(values: defaults)
        state.withLock { $0.registeredDefaults[group ?? "", default: RegisteredDefaults()].values.merge(added.values) { $1 } }
    }

    // MARK: Logs

    /// What the app's code logged with `os_log` in this context, each as `TYPE: message`.
    public var loggedMessages: [String] { state.withLock { $0.logged } }

    func log(_ line: String) { state.withLock { $0.logged.append(line) } }

    // MARK: Failures

    /// Keyferry's sentence for the last call that failed in this context, which names the cause
    /// where `SecCopyErrorMessageString` gives only Apple's generic meaning.
    public var lastFailure: String? { state.withLock { $0.lastFailure?.description } }

    func recordFailure(_ error: KeychainError) {
        state.withLock { $0.lastFailure = error }
    }
}

/// What the simulated user does when a call prompts for Face ID, Touch ID or the passcode.
public enum UserResponse: Sendable, Equatable {
    /// An enrolled face or finger that matches.
    case biometryMatch
    /// A face or finger that does not match.
    case biometryNoMatch
    /// The user taps Cancel.
    case cancel
    /// The user types the device's passcode (the context's).
    case passcode
    /// The user types this passcode, right or wrong.
    case typesPasscode(String)

    func response(passcode: String?) -> AuthenticationResponse {
        switch self {
        case .biometryMatch: .biometryMatch
        case .biometryNoMatch: .biometryNoMatch
        case .cancel: .cancel
        case .passcode: .passcode(passcode ?? "")
        case .typesPasscode(let text): .passcode(text)
        }
    }
}

/// Queued responses, then a standing one.
struct SimulatedUser {
    var queued: [UserResponse] = []
    var always: UserResponse?

    mutating func queue(_ response: UserResponse, _ count: Int) {
        queued += Array(repeating: response, count: max(count, 0))
    }

    mutating func next() -> UserResponse? {
        queued.isEmpty ? always : queued.removeFirst()
    }
}
