package import Foundation
import Hummingbird
import HummingbirdTLS
import KeychainModel
import KeyferrySystem
package import Logging
import NIOCore
import NIOSSL
package import Relay
import SyncWire

/// The untrusted store-and-forward service: members push records to a circle's logs and pull
/// them by cursor. It keeps what it is given and checks what it can without keys; it can read,
/// alter or forge nothing.
package enum RelayServer {
    /// Serves until SIGTERM or SIGINT, over TLS with `tls`. `onRunning` hears the bound port
    /// (useful with port 0).
    package static func run(
        storage: any RelayStorage, limits: RelayLimits = RelayLimits(), admission: RelayAdmission = .open, tls: RelayTLS? = nil,
        host: String, port: Int, now: @escaping @Sendable () -> Date = Date.init,
        logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        let router = Router()
        routes(router, keeper: RelayKeeper(storage: storage, limits: limits, admission: admission, now: now), logger: logger)
        let app = Application(
            router: router, server: try tls.map { try .tls(.http1(), tlsConfiguration: $0.configuration) } ?? .http1(),
            configuration: .init(address: .hostname(host, port: port), serverName: "keyferry-relay"),
            onServerRunning: { channel in
                let bound = channel.localAddress?.port ?? port
                logger.info("relay up", metadata: ["address": "\(host):\(bound)"])
                await onRunning(bound)
            },
            logger: logger)
        do {
            try await ProcessControl.runUntilInterrupted([app], logger: logger)
        } catch let error as IOError {
            let failure = SystemError(code: error.errnoCode)
            let hint = failure.isAddressInUse ? "; choose another port, or port 0 for a free one" : ""
            throw RelayError.cannotListen("\(host):\(port): \(failure.reason)\(hint).")
        } catch is SocketAddressError.UnknownHost {
            throw RelayError.cannotListen("\(host):\(port): no such host; give an IP address or a name this machine resolves, such as 127.0.0.1.")
        }
        logger.info("relay down")
    }

    static func routes(_ router: Router<BasicRequestContext>, keeper: RelayKeeper, logger: Logger) {
        let base = "/\(RelayWire.version)"
        router.get("\(base)/health") { _, _ in "ok\n" }
        router.post("\(base)/circles/:circle/acknowledgements") { request, context in
            let circle = try circle(context)
            guard let through = request.uri.queryParameters["through"].flatMap({ UInt64($0) }) else {
                throw HTTPError(.badRequest, message: "through is the cursor acknowledged, a whole number")
            }
            return try await answering(logger) {
                guard let proof = try proof(request) else {
                    throw RelayRefusal(kind: .unsigned, reason: "an acknowledgement is signed by a member (Keyferry-Signer, Keyferry-Signature)")
                }
                try await keeper.acknowledge(circle: circle, through: through, proof: proof)
                return "ok\n"
            }
        }
        router.get("\(base)/circles/:circle/forgotten-deletions") { request, context in
            let circle = try circle(context)
            let query = request.uri.queryParameters
            let after = query["after"].map { UUID(uuidString: String($0)) }
            let limit = query["limit"].map { Int($0) } ?? RelayWire.maximumPullRecords
            guard after != .some(nil), let limit, limit > 0 else {
                throw HTTPError(.badRequest, message: "after is an item's UUID and limit a whole number from 1")
            }
            let deletions = try await answering(logger) {
                try await keeper.storage.forgottenDeletions(circle: circle, after: after ?? nil, limit: min(limit, RelayWire.maximumPullRecords))
            }
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"],
                body: .init(byteBuffer: ByteBuffer(bytes: ForgottenDeletion.encode(deletions))))
        }
        router.post("\(base)/circles/:circle/:stream") { request, context in
            let (circle, stream) = (try circle(context), try stream(context))
            let bytes = try await request.body.collect(upTo: RelayWire.maximumPushBytes)
            guard let bodies = try? RelayWire.decodePush(Array(buffer: bytes)) else {
                throw HTTPError(.badRequest, message: "the push body is not a list of length-prefixed records")
            }
            return try await answering(logger) {
                do {
                    let added = try await keeper.push(
                        bodies, circle: circle, stream: stream, proof: try proof(request), token: request.headers[.init(RelayWire.admissionHeader)!])
                    logger.debug(
                        "push", metadata: ["circle": "\(circle)", "stream": "\(stream.rawValue)", "records": "\(bodies.count)", "new": "\(added)"])
                    return "\(added)\n"
                } catch let refusal as RelayRefusal {
                    logger.notice("refused push", metadata: ["circle": "\(circle)", "stream": "\(stream.rawValue)", "why": "\(refusal.reason)"])
                    throw refusal
                }
            }
        }
        router.get("\(base)/circles/:circle/:stream") { request, context in
            let (circle, stream) = (try circle(context), try stream(context))
            let query = request.uri.queryParameters
            let after = query["after"].map { UInt64($0) } ?? 0
            let limit = query["limit"].map { Int($0) } ?? RelayWire.maximumPullRecords
            guard let after, let limit, limit > 0 else { throw HTTPError(.badRequest, message: "after and limit are whole numbers, limit at least 1") }
            let records = try await answering(logger) {
                try await keeper.records(circle: circle, stream: stream, after: after, limit: min(limit, RelayWire.maximumPullRecords))
            }
            var total = 0
            let fitting = records.prefix { record in
                total += record.body.count
                return total <= RelayWire.maximumPullBytes
            }
            let answer = fitting.isEmpty ? Array(records.prefix(1)) : Array(fitting)
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"],
                body: .init(byteBuffer: ByteBuffer(bytes: RelayWire.encodePull(answer))))
        }
    }

    /// Runs a route's work: a refusal becomes its status and reason, a database failure `503`.
    private static func answering<Result>(_ logger: Logger, _ work: () async throws -> Result) async throws -> Result {
        do {
            return try await work()
        } catch let refusal as RelayRefusal {
            throw HTTPError(status(of: refusal.kind), message: refusal.reason)
        } catch let failure as RelayStorageError {
            throw unavailable(failure, logger)
        }
    }

    /// The member's signature a request's headers carry, if any.
    private static func proof(_ request: Request) throws -> PushProof? {
        try RelayWire.proof(signer: request.headers[.init(RelayWire.signerHeader)!], signature: request.headers[.init(RelayWire.signatureHeader)!])
    }

    /// The database failed, not the request: members back off and try again.
    private static func unavailable(_ failure: RelayStorageError, _ logger: Logger) -> HTTPError {
        logger.error("database failed", metadata: ["why": "\(failure.reason)"])
        return HTTPError(.serviceUnavailable, message: failure.description)
    }

    private static func status(of refusal: RelayRefusal.Kind) -> HTTPResponse.Status {
        switch refusal {
        case .malformed: .unprocessableContent
        case .unsigned: .unauthorized
        case .forbidden: .forbidden
        case .conflict: .conflict
        case .full: .init(code: 507, reasonPhrase: "Insufficient Storage")
        case .unadmitted: .forbidden
        case .resyncNeeded: .gone
        }
    }

    private static func circle(_ context: BasicRequestContext) throws -> UUID {
        guard let circle = context.parameters.get("circle").flatMap(UUID.init(uuidString:)) else {
            throw HTTPError(.badRequest, message: "the circle is not a UUID")
        }
        return circle
    }

    private static func stream(_ context: BasicRequestContext) throws -> RelayStream {
        guard let stream = context.parameters.get("stream").flatMap(RelayStream.init(rawValue:)) else {
            throw HTTPError(.notFound, message: "streams are \(RelayStream.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return stream
    }
}

/// A relay's certificate chain and private key, for serving `https://` (a fleet past one
/// machine reaches its relay over a network; members verify the certificate).
package struct RelayTLS: Sendable {
    let configuration: TLSConfiguration

    /// Reads PEM files: the certificate chain (the relay's own first) and its private key.
    package init(certificateChain: URL, privateKey: URL) throws {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(certificateChain.path) } catch {
            throw RelayError.cannotListen("https with the certificate \(certificateChain.path): it is not a readable PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else { throw RelayError.cannotListen("https with the certificate \(certificateChain.path): it holds none") }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(file: privateKey.path, format: .pem) } catch {
            throw RelayError.cannotListen("https with the key \(privateKey.path): it is not a readable PEM private key (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        // TLS 1.2 with forward secrecy and an AEAD only (TLS 1.3's suites are all that).
        configuration.cipherSuiteValues = [
            .TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            .TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, .TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            .TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, .TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ]
        self.configuration = configuration
    }
}
