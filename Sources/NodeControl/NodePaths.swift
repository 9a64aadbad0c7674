public import Foundation
import KeychainModel

/// The files a node keeps beside the device, inside its directory: `DeviceLayout`'s, as a
/// client names them (the directory standardized, the socket's length checked).
public struct NodePaths: Sendable {
    public let directory: URL
    public init(directory: URL) { self.directory = directory.standardizedFileURL }

    private var layout: DeviceLayout { DeviceLayout(root: directory) }
    public var socket: URL { layout.socket }
    var lock: URL { layout.lock }
    public var log: URL { layout.log }

    /// Fails when the socket's path is too long to bind: sun_path holds 107 bytes and a
    /// terminating zero.
    public func requireSocketPathFits() throws {
        guard socket.path.utf8.count <= 107 else {
            throw NodeError(.unusablePath, "the socket path \(socket.path) is longer than Unix sockets allow (107 bytes); use a shorter device directory.")
        }
    }
}
