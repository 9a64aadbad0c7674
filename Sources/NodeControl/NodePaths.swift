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

    /// Fails when the socket's path is too long to bind: sun_path holds 107 bytes and a
    /// terminating zero.
    public func requireSocketPathFits() throws {
        guard socket.path.utf8.count <= 107 else {
            throw NodeError(.unusablePath, "the socket path \(socket.path) is longer than Unix sockets allow (107 bytes); use a shorter device directory.")
        }
    }
}
