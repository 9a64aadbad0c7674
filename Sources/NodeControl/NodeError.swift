import Foundation
import KeychainModel

/// Failures of the node machinery itself (not of the device or the keychain): a code to branch
/// on, and a sentence that names the fix.
public struct NodeError: CodedError, Hashable {
    public static let domain = "node"

    /// Open, like `DeviceError.Code`.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// No node runs the device.
        public static let notRunning = Code(rawValue: "notRunning")
        /// A node already runs the device (or a relay its data directory).
        public static let alreadyRunning = Code(rawValue: "alreadyRunning")
        /// The process could not be started, stopped at once, or never answered.
        public static let launchFailed = Code(rawValue: "launchFailed")
        /// A running node did not answer a call, or answered nothing this client understands.
        public static let unanswered = Code(rawValue: "unanswered")
        /// The node's answer is not what this build expects: another version.
        public static let incompatible = Code(rawValue: "incompatible")
        /// A path the node or relay needs cannot be used (too long for a socket, not a directory).
        public static let unusablePath = Code(rawValue: "unusablePath")
        /// What the caller asked contradicts the state it found (a fleet whose circle moved).
        public static let conflict = Code(rawValue: "conflict")
        /// A request the client refused before sending it.
        public static let invalidRequest = Code(rawValue: "invalidRequest")
    }

    public let code: Code
    public let message: String
    /// The directory or file the error is about, when there is one: for a remedy to name.
    public let subject: String?

    public init(_ code: Code, _ message: String, subject: String? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
    }

    public static func notRunning(_ directory: URL) -> NodeError {
        NodeError(.notRunning, "no node is running for \(directory.path).", subject: directory.path)
    }

    /// A request the node could not take as sent.
    public static func invalidRequest(_ message: String) -> NodeError { NodeError(.invalidRequest, message) }

    public static func alreadyRunning(_ directory: URL) -> NodeError {
        NodeError(.alreadyRunning, "a node is already running for \(directory.path).", subject: directory.path)
    }

    public var kind: ProblemKind {
        switch code {
        case .notRunning, .unanswered: .unavailable
        case .alreadyRunning: .unavailable
        case .unusablePath, .invalidRequest, .conflict: .invalidInput
        default: .failure
        }
    }
}
