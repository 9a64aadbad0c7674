import Foundation

/// Failures of the node machinery itself (not of the device or the keychain). Each message
/// names the fix.
public enum NodeError: Error, CustomStringConvertible, Sendable {
    case notRunning(URL)
    case alreadyRunning(URL)
    /// Could not start, reach or understand the node; the message says why and where to look.
    case failed(String)

    public var description: String {
        switch self {
        case .notRunning(let dir):
            "no node is running for \(dir.path); start it with `keyferry node start \(dir.path)`."
        case .alreadyRunning(let dir):
            "a node is already running for \(dir.path); stop it first with `keyferry node stop \(dir.path)`."
        case .failed(let message): message
        }
    }
}
