import Foundation

/// Where a relay listens: `HOST:PORT`, the port from 0 (any free one) to 65535.
public struct RelayAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex, let port = Int(text[text.index(after: colon)...]),
              (0...65_535).contains(port) else { return nil }
        host = String(text[..<colon])
        self.port = port
    }

    public var description: String { "\(host):\(port)" }
}

/// What a running relay writes in its data directory (`relay.json`), and removes when it
/// stops: where it listens and which process it is, for whoever started it in the background.
public struct RelayAnnouncement: Codable, Equatable, Sendable {
    public var url: String
    public var pid: Int32

    public init(url: String, pid: Int32) {
        self.url = url
        self.pid = pid
    }

    public static func file(in data: URL) -> URL { data.appendingPathComponent("relay.json") }

    public static func read(from data: URL) -> RelayAnnouncement? {
        (try? Data(contentsOf: file(in: data))).flatMap { try? JSONDecoder().decode(RelayAnnouncement.self, from: $0) }
    }
}
