import AsyncHTTPClient
import Foundation
import KeychainModel
import KeyferryHTTP
import NIOCore
import NIOSSL
import SyncWire

extension HTTPClient {
    /// The client of every call a member makes to a relay, one per process. A refused
    /// connection fails at once: the shared client would retry it until the call's deadline,
    /// holding `circle leave` for 30 s when the relay is down, while members retry on their own
    /// terms (`RelayClient.retrying`, a node's next pass). Redirects are not followed. An
    /// `https://` relay speaks TLS 1.2 or later, its certificate verified against the system's
    /// roots and the certificates of the PEM file `KEYFERRY_RELAY_CA` names (for a private CA).
    static let relay: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        // A relay that answers 3xx is refused, not followed: a redirect would carry a signed
        // push (body and signature headers) to any address it names.
        configuration.redirectConfiguration = .disallow
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let authority = ProcessInfo.processInfo.environment[RelayClient.authorityVariable], !authority.isEmpty {
            tls.additionalTrustRoots = [.file(authority)]
        }
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
}

extension RelayClient {
    /// The environment variable naming a PEM file of extra certificate authorities for relays.
    package static let authorityVariable = "KEYFERRY_RELAY_CA"

    /// The call's failure as the relay's error: TLS apart, since trying again changes nothing.
    static func failure(_ error: any Error, at base: URL) -> RelayError {
        switch error {
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            .tlsFailed(
                "\(base.absoluteString): \(tlsReason(error)): is the relay's certificate for this host, and signed by an authority this machine "
                    + "trusts (the system's, or the PEM file \(authorityVariable) names)?")
        case let error as IOError where error.errnoCode == POSIXErrorCode.ECONNREFUSED.rawValue:
            .unreachable("\(base.absoluteString): \(unanswered(error)) (is a relay serving there?)")
        default:
            .unreachable("\(base.absoluteString): \(unanswered(error))")
        }
    }

    /// Why a call to the relay got no answer, in words.
    private static func unanswered(_ error: any Error) -> String {
        switch error {
        case let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout:
            "no answer in time"
        case let error as HTTPClientError where error == .remoteConnectionClosed:
            "the other side closed the connection"
        case is HTTPClientError:
            "the connection failed"
        default:
            ConnectionFailure.reason(error) ?? "\(error)"
        }
    }

    /// BoringSSL's reason code (`CERTIFICATE_VERIFY_FAILED`) rather than its whole error
    /// stack with source paths.
    private static func tlsReason(_ error: any Error) -> String {
        let text = "\(error)"
        guard let range = text.range(of: #"OPENSSL_internal:([A-Z_]+)"#, options: .regularExpression) else { return text }
        return String(text[range].dropFirst("OPENSSL_internal:".count))
    }
}
