/// A family of `CodedFailure`s: its name on the wire, and what kind of problem each code is.
public protocol FailureDomain: Sendable {
    /// `device`, `node`, `circle`: the `domain` of the family's errors.
    static var name: String { get }
    static func kind(of code: CodedFailure<Self>.Code) -> ProblemKind
    /// Whether a call that failed with `code` may succeed later, unchanged.
    static func isRetryable(_ code: CodedFailure<Self>.Code) -> Bool
}

extension FailureDomain {
    public static func isRetryable(_ code: CodedFailure<Self>.Code) -> Bool { kind(of: code) == .unavailable }
}

/// The one struct behind the families of failures that are Keyferry's own (`DeviceError`,
/// `NodeError`, `CircleError`), as swift-nio's `FileSystemError` is behind every file-system
/// failure: an open code to branch on, a sentence for people, the path it is about, and the
/// error that caused it, kept as a value for logs rather than folded into the sentence.
public struct CodedFailure<Domain: FailureDomain>: CodedError, Hashable {
    /// Open: a layer above may add codes of its own.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    public static var domain: String { Domain.name }

    public let code: Code
    public let message: String
    /// The directory or file the error is about, when there is one: for a remedy to name.
    public let subject: String?
    /// What went wrong underneath, when the failure stands for another error; it stays in this
    /// process (it is neither compared nor sent).
    public let cause: (any Error)?

    public init(_ code: Code, _ message: String, subject: String? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
        self.cause = cause
    }

    public var kind: ProblemKind { Domain.kind(of: code) }
    public var isRetryable: Bool { Domain.isRetryable(code) }

    /// The sentence and the causes under it, for a log.
    public var detailedDescription: String {
        guard let cause else { return message }
        let underneath = (cause as? any CodedErrorWithCause)?.detailedDescription ?? "\(cause)"
        return "\(message) (caused by \(type(of: cause)): \(underneath))"
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.subject == rhs.subject
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(subject)
    }

    private enum CodingKeys: String, CodingKey { case code, message, subject }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try container.decode(Code.self, forKey: .code), try container.decode(String.self, forKey: .message),
            subject: try container.decodeIfPresent(String.self, forKey: .subject))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encodeIfPresent(subject, forKey: .subject)
    }
}

/// A failure that can say what caused it (`CodedFailure`), whatever its family.
public protocol CodedErrorWithCause: CodedError {
    var detailedDescription: String { get }
}

extension CodedFailure: CodedErrorWithCause {}
