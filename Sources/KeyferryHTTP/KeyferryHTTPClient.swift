import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

extension HTTPClient {
    /// The client of every call Keyferry makes, one per process. A refused connection fails at
    /// once: the shared client would retry it until the call's deadline, holding `circle leave`
    /// for 30 s when the relay is down, while Keyferry's callers retry on their own terms
    /// (`RelayClient.retrying`, a node's next pass). Redirects are not followed. An `https://`
    /// relay speaks TLS 1.2 or later, its certificate verified against the system's roots and
    /// the certificates of the PEM file `KEYFERRY_RELAY_CA` names (for a private CA).
    package static let keyferry: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        // A relay that answers 3xx is refused, not followed: a redirect would carry a signed
        // push (body and signature headers) to any address it names.
        configuration.redirectConfiguration = .disallow
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let authority = ProcessInfo.processInfo.environment[relayAuthorityVariable], !authority.isEmpty {
            tls.additionalTrustRoots = [.file(authority)]
        }
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// The environment variable naming a PEM file of extra certificate authorities for relays.
    package static let relayAuthorityVariable = "KEYFERRY_RELAY_CA"
}

/// Why an HTTP call got no answer, in words rather than the HTTP stack's type names: for the
/// relay's members and the node's clients alike.
package enum ConnectionFailure {
    package static func reason(_ error: any Error) -> String {
        switch error {
        case let error as IOError where error.errnoCode == POSIXErrorCode.ECONNREFUSED.rawValue:
            "nothing is listening there"
        case let error as HTTPClientError where error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout:
            "no answer in time"
        case let error as HTTPClientError where error == .remoteConnectionClosed:
            "the other side closed the connection"
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            "TLS failed (\(tlsReason(error))): is the relay's certificate for this host, and signed by an authority this machine trusts "
                + "(the system's, or the PEM file \(HTTPClient.relayAuthorityVariable) names)?"
        case is HTTPClientError, is IOError:
            "the connection failed"
        default:
            "\(error)"
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
