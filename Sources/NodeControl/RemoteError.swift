public import KeychainModel

/// An error a node reported in a domain this client does not rebuild (a newer node's, or one
/// of a layer the client does not link): its domain, code, kind and sentence, as they came.
public struct RemoteError: CodedError, Hashable {
    public static let domain = "remote"

    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    public let remoteDomain: String
    public let code: Code
    public let kind: ProblemKind
    public let message: String
    public let isRetryable: Bool

    public init(domain: String, code: String, kind: ProblemKind, message: String, isRetryable: Bool) {
        remoteDomain = domain
        self.code = Code(rawValue: code)
        self.kind = kind
        self.message = message
        self.isRetryable = isRetryable
    }

    public var domain: String { remoteDomain }
}
