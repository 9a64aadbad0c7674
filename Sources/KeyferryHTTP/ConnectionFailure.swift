import Foundation
import NIOCore

/// Why an HTTP call got no answer, in words rather than the HTTP stack's type names: for a
/// node's clients, and beneath the relay client's own words for TLS.
package enum ConnectionFailure {
    /// The words for `error`, or nil when it is not the connection's.
    package static func reason(_ error: any Error) -> String? {
        switch error {
        case let error as IOError where error.errnoCode == POSIXErrorCode.ECONNREFUSED.rawValue:
            "nothing is listening there"
        case let error as IOError where error.errnoCode == POSIXErrorCode.ENOENT.rawValue:
            "there is no socket there"
        case UnixSocketHTTP.Failure.system(_, let code) where code == ECONNREFUSED:
            "nothing is listening there"
        case UnixSocketHTTP.Failure.system(_, let code) where code == ENOENT:
            "there is no socket there"
        case UnixSocketHTTP.Failure.system(let call, let code):
            "the connection failed: \(call): \(String(cString: strerror(code)))"
        case UnixSocketHTTP.Failure.malformed(let what):
            "the answer is not HTTP: \(what)"
        case UnixSocketHTTP.Failure.timedOut:
            "no answer in time"
        case let error as ChannelError where error.isConnectTimeout:
            "no answer in time"
        case UnixSocketHTTP.Failure.closedEarly:
            "the other side closed the connection"
        case UnixSocketHTTP.Failure.tooLarge(let limit):
            "the answer is larger than \(limit >> 20) MiB"
        case is IOError, is ChannelError:
            "the connection failed"
        default:
            nil
        }
    }
}

extension ChannelError {
    fileprivate var isConnectTimeout: Bool {
        if case .connectTimeout = self { return true }
        return false
    }
}
