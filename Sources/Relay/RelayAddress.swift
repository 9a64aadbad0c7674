import Foundation

/// Where a relay listens, written either way a user meets it, everywhere one is asked for:
/// `HOST:PORT` (as `relay serve --listen` and fleet files take it), `http://HOST:PORT` (as
/// `relay serve` prints it) or `https://HOST:PORT` (a relay serving TLS); the port from 0 (any
/// free one) to 65535.
public struct RelayAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Reached over TLS (`https://`), its certificate verified.
    public var secure: Bool

    public init(host: String, port: Int, secure: Bool = false) {
        self.host = host
        self.port = port
        self.secure = secure
    }

    public init?(_ text: String) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        secure = rest.hasPrefix("https://")
        if rest.hasPrefix("http://") { rest = rest.dropFirst(7) }
        if rest.hasPrefix("https://") { rest = rest.dropFirst(8) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), colon > rest.startIndex, !rest[..<colon].contains("/"),
            let port = Int(rest[rest.index(after: colon)...]), (0...65_535).contains(port)
        else { return nil }
        host = String(rest[..<colon])
        self.port = port
    }

    /// What a member connects to: `http://HOST:PORT` or `https://HOST:PORT`.
    public var url: URL { URL(string: "\(secure ? "https" : "http")://\(host):\(port)")! }

    public var description: String { secure ? "https://\(host):\(port)" : "\(host):\(port)" }

    /// The sentence for an address that is none of the forms.
    public static func problem(with text: String) -> String {
        "'\(text)' is not a relay address; write HOST:PORT, http://HOST:PORT or https://HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:7700."
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
