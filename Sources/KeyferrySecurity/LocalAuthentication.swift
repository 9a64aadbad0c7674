public import Foundation
import KeychainModel
import KeyferryThreads

// The LocalAuthentication names keychain code uses beside Security. The user is the current
// `KeyferryContext`'s simulated one: what they do at a prompt is set by the test.

public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
}

/// What `LAContext.setCredential` sets: Apple has one kind.
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
}

public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

public let LAErrorDomain = "com.apple.LocalAuthentication"

/// Apple's LocalAuthentication error: `catch let error as LAError { error.code == .userCancel }`.
public struct LAError: Error, Equatable, Sendable, CustomNSError, CustomStringConvertible {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case notInteractive = -1004
    }

    public let code: Code

    public init(_ code: Code) { self.code = code }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var description: String { "LAError \(code) (\(code.rawValue))" }

    public static let authenticationFailed = Code.authenticationFailed
    public static let userCancel = Code.userCancel
    public static let userFallback = Code.userFallback
    public static let systemCancel = Code.systemCancel
    public static let passcodeNotSet = Code.passcodeNotSet
    public static let biometryNotAvailable = Code.biometryNotAvailable
    public static let biometryNotEnrolled = Code.biometryNotEnrolled
    public static let biometryLockout = Code.biometryLockout
    public static let appCancel = Code.appCancel
    public static let invalidContext = Code.invalidContext
    public static let notInteractive = Code.notInteractive
}

/// An authentication context on the device of the current `KeyferryContext` (the one in force
/// where it is created). Passed in `kSecUseAuthenticationContext`, it carries
/// `interactionNotAllowed`, and a successful `evaluatePolicy` answers the item's prompt, as on a
/// device.
open class LAContext: Hashable, @unchecked Sendable {
    // Apple's is an NSObject: equal to itself alone, so it can sit in a `[String: AnyHashable]` query.
    public static func == (lhs: LAContext, rhs: LAContext) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    private let keyferry: KeyferryContext?
    private let state = Locked(State())

    private struct State {
        var interactionNotAllowed = false
        var evaluated: AuthenticationResponse?
        var domainState: Data?
        var invalidated = false
        var applicationPassword: Data?
    }

    public init() {
        keyferry = KeyferryContext.current
    }

    /// No prompt may be shown: a keychain read that would ask fails with
    /// errSecInteractionNotAllowed; `evaluatePolicy` fails with `.notInteractive`.
    open var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    open var localizedReason: String = ""
    open var localizedFallbackTitle: String?
    open var localizedCancelTitle: String?
    open var touchIDAuthenticationAllowableReuseDuration: TimeInterval = 0

    /// What the device has enrolled: Face ID on a phone, Touch ID on a Mac.
    open var biometryType: LABiometryType {
        guard let status = try? keyferry?.backend.status(), status.biometryEnrolled else { return .none }
        return status.profile == .mac ? .touchID : .faceID
    }

    /// Changes whenever a face or finger is enrolled, re-enrolled or removed; apps compare it
    /// with a stored copy to notice a new enrollment. Set by `canEvaluatePolicy` and
    /// `evaluatePolicy`, as on a device; nil without biometry.
    open var evaluatedPolicyDomainState: Data? { state.withLock { $0.domainState } }

    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        do {
            try check(policy)
            return true
        } catch let failure as LAError {
            error?.pointee = NSError(domain: LAErrorDomain, code: failure.code.rawValue)
            return false
        } catch {
            return false
        }
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        do {
            try evaluate(policy)
            reply(true, nil)
        } catch {
            reply(false, error)
        }
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try evaluate(policy)
        return true
    }

    /// The app's password for items whose access control has `.applicationPassword`: an add
    /// seals the secret under it, a read opens it. nil clears it.
    @discardableResult
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        state.withLock { $0.applicationPassword = credential }
        return true
    }

    open func isCredentialSet(_ type: LACredentialType) -> Bool { state.withLock { $0.applicationPassword != nil } }

    var applicationPassword: Data? { state.withLock { $0.applicationPassword } }

    /// Later evaluations fail with `.invalidContext`.
    open func invalidate() {
        state.withLock { $0.invalidated = true }
    }

    // MARK: Simulation

    private func check(_ policy: LAPolicy) throws {
        guard let keyferry, let status = try? keyferry.backend.status() else { throw LAError(.invalidContext) }
        guard !state.withLock({ $0.invalidated }) else { throw LAError(.invalidContext) }
        state.withLock { $0.domainState = status.biometryDomainState }
        guard status.passcodeSet else { throw LAError(.passcodeNotSet) }
        if policy == .deviceOwnerAuthenticationWithBiometrics, !status.biometryEnrolled { throw LAError(.biometryNotEnrolled) }
    }

    /// The simulated user answers one prompt.
    private func evaluate(_ policy: LAPolicy) throws {
        try check(policy)
        guard !interactionNotAllowed else { throw LAError(.notInteractive) }
        let keyferry = keyferry!
        let biometry = (try? keyferry.backend.status().biometryEnrolled) == true
        keyferry.wait(keyferry.latency.prompt)
        for response in keyferry.responses() {
            switch response {
            case .biometryMatch where biometry:
                state.withLock { $0.evaluated = .biometryMatch }
                return
            case .biometryMatch, .biometryNoMatch:
                if policy == .deviceOwnerAuthenticationWithBiometrics { throw LAError(.authenticationFailed) }
            case .cancel:
                throw LAError(.userCancel)
            case .passcode(let typed):
                guard policy == .deviceOwnerAuthentication else { throw LAError(.userFallback) }
                guard typed == keyferry.passcode else { throw LAError(.authenticationFailed) }
                state.withLock { $0.evaluated = .passcode(typed) }
                return
            }
        }
        throw LAError(.authenticationFailed)
    }

    /// What a keychain call carrying this context knows: whether it may prompt, and the
    /// evaluation it may reuse.
    var authentication: AuthenticationContext {
        state.withLock { state in
            AuthenticationContext(responses: state.evaluated.map { [$0] } ?? [], interactionAllowed: !state.interactionNotAllowed)
        }
    }
}
