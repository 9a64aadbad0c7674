/// A failure of the simulated device itself rather than of a keychain call: a directory that
/// is not a device, an app that is not installed, a sandbox file that is protected right now.
/// (A device that is off answers keychain calls with `errSecNotAvailable`.)
public struct DeviceError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
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
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
