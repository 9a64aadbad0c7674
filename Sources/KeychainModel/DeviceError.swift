public import Foundation

/// A failure of the simulated device itself rather than of a keychain call: a directory that
/// is not a device, an app that is not installed, a sandbox file that is protected right now.
/// (A device that is off answers keychain calls with `errSecNotAvailable`.)
public typealias DeviceError = CodedFailure<DeviceErrorDomain>

public enum DeviceErrorDomain: FailureDomain {
    public static let name = "device"

    public static func kind(of code: DeviceError.Code) -> ProblemKind {
        switch code {
        case .notADevice, .appNotInstalled, .noSuchFile: .notFound
        case .alreadyExists, .invalidArgument: .invalidInput
        case .protectedDataUnavailable, .inUse, .securityDelay: .unavailable
        default: .failure
        }
    }
}

extension CodedFailure.Code where Domain == DeviceErrorDomain {
    public static var notADevice: Self { Self(rawValue: "notADevice") }
    public static var alreadyExists: Self { Self(rawValue: "alreadyExists") }
    public static var unsupportedFormat: Self { Self(rawValue: "unsupportedFormat") }
    public static var corrupt: Self { Self(rawValue: "corrupt") }
    public static var invalidArgument: Self { Self(rawValue: "invalidArgument") }
    public static var appNotInstalled: Self { Self(rawValue: "appNotInstalled") }
    public static var protectedDataUnavailable: Self { Self(rawValue: "protectedDataUnavailable") }
    public static var noSuchFile: Self { Self(rawValue: "noSuchFile") }
    public static var io: Self { Self(rawValue: "io") }
    /// Another holder has the device: its node, or a command that restores or reads it.
    public static var inUse: Self { Self(rawValue: "inUse") }
    /// Stolen Device Protection holds the change for its security delay: ask again after it.
    public static var securityDelay: Self { Self(rawValue: "securityDelay") }
    /// A failure Keyferry did not foresee (a database error, say): the device's, not the
    /// caller's.
    public static var `internal`: Self { Self(rawValue: "internal") }
}

extension CodedFailure where Domain == DeviceErrorDomain {
    /// The device in `directory` is held by another: a node runs it, or a command restores or
    /// reads it powered off.
    public static func inUse(_ directory: URL) -> DeviceError {
        DeviceError(
            .inUse, "\(directory.path) is in use: its node runs it, or another command holds it (a restore, a read of it powered off).", subject: directory.path
        )
    }
}
