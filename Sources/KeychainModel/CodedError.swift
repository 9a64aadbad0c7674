/// What sort of problem an error is: the fact a caller branches on, and what the command line
/// turns into its exit status (`keyferry help exit-codes`).
public enum ProblemKind: String, Codable, Sendable, CaseIterable {
    /// The request is wrong as given: a malformed argument, file or value. Changing the request
    /// fixes it.
    case invalidInput
    /// A passcode, password or biometry did not authenticate, or none was given where one is
    /// needed (errSecAuthFailed).
    case authentication
    /// What the request names does not exist: a device, an archive, a file, an app, a member.
    case notFound
    /// What would serve the request is not there now: no node runs the device, the relay does
    /// not answer, the device is busy, off or disabled. The same request may succeed later.
    case unavailable
    /// The keychain answered with a status other than success (and other than errSecAuthFailed).
    case keychain
    /// Anything the request cannot fix: damaged data, the disk, a failure inside Keyferry.
    case failure
}

/// One shape for Keyferry's errors, from the engines to the shell and across the wire: a domain
/// and a code to branch on, the kind of problem, and a sentence stating the fact. Remedies that
/// name a command are the command line's to add, not the engine's.
public protocol CodedError: Error, Sendable, Codable, CustomStringConvertible {
    associatedtype Code: RawRepresentable & Sendable where Code.RawValue: LosslessStringConvertible

    /// The family: `keychain`, `device`, `archive`, `circle`, `relay`, `node`.
    static var domain: String { get }
    /// `Self.domain`, unless the error stands for another's (an error a node reported).
    var domain: String { get }
    /// Stable, for programs: `appNotInstalled`, `wrongPassword`, a keychain status.
    var code: Code { get }
    /// What happened, in one sentence.
    var message: String { get }
    var kind: ProblemKind { get }
    /// Whether the same call may succeed later, unchanged.
    var isRetryable: Bool { get }
}

extension CodedError {
    /// The code as it is written on the wire and in `--json`: `appNotInstalled`, `-25300`.
    public var codeName: String { String(code.rawValue) }
    public var domain: String { Self.domain }
    public var isRetryable: Bool { kind == .unavailable }
    public var description: String { message }
}
