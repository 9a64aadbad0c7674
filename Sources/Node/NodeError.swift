import Foundation

/// Failures of the node machinery itself (not of the device or the keychain). Each message
/// names the fix.
public enum NodeError: Error, CustomStringConvertible, Sendable {
    case notRunning(URL)
    case alreadyRunning(URL)
    case notADevice(URL)
    case launch(String)
    case protocolMismatch(String)

    public var description: String {
        switch self {
        case .notRunning(let dir):
            "no node is running for \(dir.path); start it with `keyferry node start \(dir.path)`."
        case .alreadyRunning(let dir):
            "a node is already running for \(dir.path); stop it first with `keyferry node stop \(dir.path)`."
        case .notADevice(let dir):
            "\(dir.path) is not a Keyferry device (no device.json); create one with `keyferry device init \(dir.path)`."
        case .launch(let message): message
        case .protocolMismatch(let message): message
        }
    }
}
