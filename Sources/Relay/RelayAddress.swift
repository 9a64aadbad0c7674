import Foundation

/// Where a relay listens, written either way a user meets it, everywhere one is asked for:
/// `HOST:PORT` (as `relay serve --listen` and fleet files take it) or `http://HOST:PORT` (as
/// `relay serve` prints it); the port from 0 (any free one) to 65535.
public struct RelayAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init?(_ text: String) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        if rest.hasPrefix("http://") { rest = rest.dropFirst(7) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), colon > rest.startIndex, !rest[..<colon].contains("/"),
              let port = Int(rest[rest.index(after: colon)...]), (0...65_535).contains(port) else { return nil }
        host = String(rest[..<colon])
        self.port = port
    }

    /// What a member connects to: `http://HOST:PORT`.
    public var url: URL { URL(string: "http://\(host):\(port)")! }

    public var description: String { "\(host):\(port)" }

    /// The sentence for an address that is neither form.
    public static func problem(with text: String) -> String {
        if text.hasPrefix("https://") {
            return "'\(text)': relays speak plain HTTP for now (their records are sealed and signed end to end); use http://HOST:PORT or HOST:PORT."
        }
        return "'\(text)' is not a relay address; write HOST:PORT or http://HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:7700."
    }
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
