public import Foundation
public import KeychainModel

/// Failures of the node machinery itself (not of the device or the keychain): a code to branch
/// on, and a sentence that names the fix.
public typealias NodeError = CodedFailure<NodeErrorDomain>

public enum NodeErrorDomain: FailureDomain {
    public static let name = "node"

    public static func kind(of code: NodeError.Code) -> ProblemKind {
        switch code {
        case .notRunning, .unanswered, .alreadyRunning: .unavailable
        case .unusablePath, .invalidRequest, .conflict: .invalidInput
        default: .failure
        }
    }
}

extension CodedFailure.Code where Domain == NodeErrorDomain {
    /// No node runs the device.
    public static var notRunning: Self { Self(rawValue: "notRunning") }
    /// A node already runs the device (or a relay its data directory).
    public static var alreadyRunning: Self { Self(rawValue: "alreadyRunning") }
    /// The process could not be started, stopped at once, or never answered.
    public static var launchFailed: Self { Self(rawValue: "launchFailed") }
    /// A running node did not answer a call, or answered nothing this client understands.
    public static var unanswered: Self { Self(rawValue: "unanswered") }
    /// The node's answer is not what this build expects: another version.
    public static var incompatible: Self { Self(rawValue: "incompatible") }
    /// A path the node or relay needs cannot be used (too long for a socket, not a directory).
    public static var unusablePath: Self { Self(rawValue: "unusablePath") }
    /// What the caller asked contradicts the state it found (a fleet whose circle moved).
    public static var conflict: Self { Self(rawValue: "conflict") }
    /// A request the client refused before sending it.
    public static var invalidRequest: Self { Self(rawValue: "invalidRequest") }
}

extension CodedFailure where Domain == NodeErrorDomain {
    public static func notRunning(_ directory: URL) -> NodeError {
        NodeError(.notRunning, "no node is running for \(directory.path).", subject: directory.path)
    }

    /// A request the node could not take as sent.
    public static func invalidRequest(_ message: String) -> NodeError { NodeError(.invalidRequest, message) }

    public static func alreadyRunning(_ directory: URL) -> NodeError {
        NodeError(.alreadyRunning, "a node is already running for \(directory.path).", subject: directory.path)
    }
}
