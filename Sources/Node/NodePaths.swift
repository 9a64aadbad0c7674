import Foundation

/// The files a node keeps beside the device, inside its directory.
public struct NodePaths: Sendable {
    public let directory: URL
    public init(directory: URL) { self.directory = directory.standardizedFileURL }

    /// The control API (owner-only).
    public var socket: URL { directory.appendingPathComponent("node.sock") }
    /// Held locked by the running node: a second start of the same device fails on it.
    var lock: URL { directory.appendingPathComponent("node.lock") }
    /// What the node did, without secrets.
    public var log: URL { directory.appendingPathComponent("node.log") }
}
