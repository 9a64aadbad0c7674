/// Why a relay call failed: no answer (worth asking again later), a refusal, or a relay that
/// cannot serve.
public enum RelayError: CodedError, Equatable {
    public static let domain = "relay"

    case unreachable(String)
    case refused(String)
    /// The relay itself could not bind its address.
    case cannotListen(String)
    /// The relay forgot deletions after the cursor a member asked from, which it had not
    /// acknowledged (it was away longer than the relay keeps them): it reads the stream again
    /// from the start (Protocol/relay.md, "Compaction").
    case resyncNeeded(String)
    /// TLS with the relay failed: most often its certificate is for another host, or signed by
    /// an authority this machine does not trust. Trying again changes nothing.
    case tlsFailed(String)

    public enum Code: String, Sendable {
        case unreachable, refused, cannotListen, resyncNeeded, tlsFailed
    }

    public var code: Code {
        switch self {
        case .unreachable: .unreachable
        case .refused: .refused
        case .cannotListen: .cannotListen
        case .resyncNeeded: .resyncNeeded
        case .tlsFailed: .tlsFailed
        }
    }

    public var kind: ProblemKind {
        switch self {
        case .unreachable: .unavailable
        case .refused, .resyncNeeded: .failure
        // Not retried (nothing changes until the certificate or the trust does), but as a
        // relay that cannot be reached: what would serve the request is not there.
        case .tlsFailed: .unavailable
        case .cannotListen: .unavailable
        }
    }

    public var message: String { description }

    public var description: String {
        switch self {
        case .unreachable(let why): "the relay cannot be reached: \(why)"
        case .refused(let why): "the relay refused the request: \(why)"
        case .cannotListen(let why): "the relay cannot listen on \(why)"
        case .resyncNeeded(let why): "the relay asks for a resync: \(why)"
        case .tlsFailed(let why): "TLS with the relay failed: \(why)"
        }
    }
}
