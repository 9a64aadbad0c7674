package import Foundation

/// Where a relay listens, written either way a user meets it, everywhere one is asked for:
/// `HOST:PORT` (as `relay serve --listen` and fleet files take it), `http://HOST:PORT` (as
/// `relay serve` prints it) or `https://HOST:PORT` (a relay serving TLS); the port from 0 (any
/// free one) to 65535.
package struct RelayAddress: Equatable, Sendable, CustomStringConvertible {
    package let host: String
    package let port: Int
    /// Reached over TLS (`https://`), its certificate verified.
    package let secure: Bool
    /// What a member connects to: `http://HOST:PORT` or `https://HOST:PORT`.
    package let url: URL

    /// nil for a host that is not a DNS name, an IPv4 address or a bracketed IPv6 address (a
    /// space, a slash, a user@), or a port outside 0...65535.
    package init?(host: String, port: Int, secure: Bool = false) {
        let name = #"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$"#
        let ipv6 = #"^\[[0-9A-Fa-f:.]{2,45}\]$"#
        guard host.range(of: name, options: .regularExpression) != nil || host.range(of: ipv6, options: .regularExpression) != nil,
            (0...65_535).contains(port),
            let url = URL(string: "\(secure ? "https" : "http")://\(host):\(port)")
        else { return nil }
        self.host = host
        self.port = port
        self.secure = secure
        self.url = url
    }

    package init?(_ text: String) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        let secure = rest.hasPrefix("https://")
        if rest.hasPrefix("http://") { rest = rest.dropFirst(7) }
        if rest.hasPrefix("https://") { rest = rest.dropFirst(8) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), colon > rest.startIndex, let port = Int(rest[rest.index(after: colon)...]) else { return nil }
        self.init(host: String(rest[..<colon]), port: port, secure: secure)
    }

    /// 127.0.0.1 on `port`: a constant host and a port in range, which every check passes.
    package static func loopback(port: UInt16) -> RelayAddress { RelayAddress(host: "127.0.0.1", port: Int(port))! }

    /// Whether only this machine reaches the host: `localhost`, 127.0.0.0/8 or `[::1]`. A
    /// relay listening anywhere else is asked who may create circles (`RelayAdmission`).
    package var isLoopback: Bool {
        host.lowercased() == "localhost" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// The same relay on another port (a fleet's `--relay-port`).
    package func on(port: Int) -> RelayAddress? { RelayAddress(host: host, port: port, secure: secure) }

    package var description: String { secure ? "https://\(host):\(port)" : "\(host):\(port)" }

    /// The sentence for an address that is none of the forms.
    package static func problem(with text: String) -> String {
        "'\(text)' is not a relay address; write HOST:PORT, http://HOST:PORT or https://HOST:PORT with a port from 0 to 65535, such as 127.0.0.1:7700."
    }
}

/// What a running relay writes in its data directory (`relay.json`), and removes when it
/// stops: where it listens and which process it is, for whoever started it in the background.
package struct RelayAnnouncement: Codable, Equatable, Sendable {
    package var url: String
    package var pid: Int32

    package init(url: String, pid: Int32) {
        self.url = url
        self.pid = pid
    }

    package static func file(in data: URL) -> URL { data.appendingPathComponent("relay.json") }

    package static func read(from data: URL) -> RelayAnnouncement? {
        (try? Data(contentsOf: file(in: data))).flatMap { try? JSONDecoder().decode(RelayAnnouncement.self, from: $0) }
    }
}
