import Foundation

/// A failure of the simulated device itself rather than of a keychain call: a directory that
/// is not a device, an app that is not installed, a sandbox file that is protected right now.
/// (A device that is off answers keychain calls with `errSecNotAvailable`.)
public struct DeviceError: CodedError, Hashable {
    public static let domain = "device"

    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let notADevice = Code(rawValue: "notADevice")
        public static let alreadyExists = Code(rawValue: "alreadyExists")
        public static let unsupportedFormat = Code(rawValue: "unsupportedFormat")
        public static let corrupt = Code(rawValue: "corrupt")
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        public static let appNotInstalled = Code(rawValue: "appNotInstalled")
        public static let protectedDataUnavailable = Code(rawValue: "protectedDataUnavailable")
        public static let noSuchFile = Code(rawValue: "noSuchFile")
        public static let io = Code(rawValue: "io")
        /// Another holder has the device: its node, or a command that restores or reads it.
        public static let inUse = Code(rawValue: "inUse")
        /// Stolen Device Protection holds the change for its security delay: ask again after it.
        public static let securityDelay = Code(rawValue: "securityDelay")
        /// A failure Keyferry did not foresee (a database error, say): the device's, not the
        /// caller's.
        public static let `internal` = Code(rawValue: "internal")
    }

    public let code: Code
    public let message: String
    /// The directory or file the error is about, when there is one: for a remedy to name.
    public let subject: String?

    public init(_ code: Code, _ message: String, subject: String? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
    }

    /// The device in `directory` is held by another: a node runs it, or a command restores or
    /// reads it powered off.
    public static func inUse(_ directory: URL) -> DeviceError {
        DeviceError(
            .inUse, "\(directory.path) is in use: its node runs it, or another command holds it (a restore, a read of it powered off).", subject: directory.path
        )
    }

    public var kind: ProblemKind {
        switch code {
        case .notADevice, .appNotInstalled, .noSuchFile: .notFound
        case .alreadyExists, .invalidArgument: .invalidInput
        case .protectedDataUnavailable, .inUse, .securityDelay: .unavailable
        default: .failure
        }
    }
}
