import AsyncHTTPClient
package import Foundation
import KeychainModel
import KeyferryCrypto
import KeyferryThreads
import NIOCore
import NIOHTTP1
import Relay
package import SyncWire

/// A member's side of the relay: push records to a circle's stream, pull them by cursor.
package struct RelayClient: RelayTransport {
    package let base: URL
    /// How long one request may take, for a relay that accepts and then does not answer; one
    /// that refuses the connection fails the request at once.
    package var timeout: Duration
    /// The relay operator's admission token, sent with membership pushes: a relay that admits
    /// only holders of one asks for it when a push creates a circle.
    package var admissionToken: String?

    /// `url` as given to `circle create --relay`, such as `http://127.0.0.1:7700`.
    package init(url: URL, timeout: Duration = .seconds(30), admissionToken: String? = nil) {
        base = url
        self.timeout = timeout
        self.admissionToken = admissionToken
    }

    /// Returns how many of `bodies` the relay did not hold yet.
    @discardableResult
    package func push(_ bodies: [[UInt8]], circle: UUID, stream: RelayStream, proof: PushProof?) async throws -> Int {
        var headers = proof.map { [(RelayWire.signerHeader, Hex.encode($0.signer.bytes)), (RelayWire.signatureHeader, Hex.encode($0.signature))] } ?? []
        if stream == .membership, let admissionToken { headers.append((RelayWire.admissionHeader, admissionToken)) }
        let answer = try await call(.POST, circle, stream, query: "", headers: headers, body: RelayWire.encodePush(bodies))
        return Int(String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    package func pull(circle: UUID, stream: RelayStream, after cursor: UInt64, limit: Int = RelayWire.maximumPullRecords) async throws -> [RelayRecord] {
        let answer = try await call(.GET, circle, stream, query: "?after=\(cursor)&limit=\(limit)", headers: [], body: nil)
        do { return try RelayWire.decodePull(answer) } catch { throw RelayError.refused("its answer is not a list of records") }
    }

    package func acknowledge(circle: UUID, through cursor: UInt64, proof: PushProof) async throws {
        let headers = [(RelayWire.signerHeader, Hex.encode(proof.signer.bytes)), (RelayWire.signatureHeader, Hex.encode(proof.signature))]
        _ = try await call(.POST, path: "/circles/\(circle.uuidString)/acknowledgements?through=\(cursor)", headers: headers, body: nil)
    }

    package func forgottenDeletions(circle: UUID, after item: UUID?, limit: Int) async throws -> [ForgottenDeletion] {
        let query = "?limit=\(limit)" + (item.map { "&after=\($0.uuidString)" } ?? "")
        let answer = try await call(.GET, path: "/circles/\(circle.uuidString)/forgotten-deletions" + query, headers: [], body: nil)
        do { return try ForgottenDeletion.decode(answer) } catch { throw RelayError.refused("its answer is not a list of deletions") }
    }

    /// Retries while the relay is unreachable, waiting longer each time (`Backoff` from 0.1 s
    /// to `maximumDelay`), until `deadline`; a refusal ends it at once.
    package func retrying<T: Sendable>(
        until deadline: ContinuousClock.Instant, maximumDelay: Duration = .seconds(2),
        _ operation: @Sendable (RelayClient) async throws -> T
    ) async throws -> T {
        try await retrying(until: deadline, on: ContinuousClock(), maximumDelay: maximumDelay, operation)
    }

    /// The same, waiting on `clock`, which a test moves on instead of waiting.
    package func retrying<T: Sendable, C: Clock<Duration>>(
        until deadline: C.Instant, on clock: C, maximumDelay: Duration = .seconds(2),
        _ operation: @Sendable (RelayClient) async throws -> T
    ) async throws -> T {
        var backoff = Backoff(initial: .milliseconds(100), maximum: maximumDelay)
        while true {
            var attempt = self
            attempt.timeout = min(timeout, max(.milliseconds(50), clock.now.duration(to: deadline)))
            do {
                return try await operation(attempt)
            } catch RelayError.unreachable(let why) {
                let delay = backoff.next()
                guard clock.now.advanced(by: delay) < deadline else { throw RelayError.unreachable(why) }
                try await clock.sleep(for: delay)
            }
        }
    }

    private func call(
        _ method: HTTPMethod, _ circle: UUID, _ stream: RelayStream, query: String, headers: [(String, String)],
        body: [UInt8]?
    ) async throws -> [UInt8] {
        try await call(method, path: "/circles/\(circle.uuidString)/\(stream.rawValue)" + query, headers: headers, body: body)
    }

    private func call(_ method: HTTPMethod, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> [UInt8] {
        var request = HTTPClientRequest(url: base.absoluteString + "/\(RelayWire.version)" + path)
        request.method = method
        request.headers.add(contentsOf: headers)
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response: HTTPClientResponse
        let bytes: ByteBuffer
        do {
            response = try await HTTPClient.relay.execute(request, timeout: TimeAmount(timeout))
            bytes = try await response.body.collect(upTo: RelayWire.maximumPullBytes + RelayWire.maximumRecordBytes + 12 * RelayWire.maximumPullRecords)
        } catch {
            throw Self.failure(error, at: base)
        }
        guard response.status == .ok else {
            // A relay always says why; a server that does not is something else.
            let why = Self.reason(refusal: bytes).map { ": \($0)" } ?? " (is it a Keyferry relay?)"
            // The relay is up but its database is not: a passing fault, retried like an outage.
            if response.status == .serviceUnavailable { throw RelayError.unreachable("\(base.absoluteString)\(why)") }
            if response.status == .gone { throw RelayError.resyncNeeded("\(base.absoluteString)\(why)") }
            throw RelayError.refused("\(response.status.code) \(response.status.reasonPhrase) from \(base.absoluteString)\(why)")
        }
        return Array(buffer: bytes)
    }

    /// The reason in a refusal's body: the relay's `{"error":{"message":…}}`, or the body's text.
    private static func reason(refusal body: ByteBuffer) -> String? {
        struct Refusal: Decodable {
            struct Reason: Decodable { let message: String }
            let error: Reason
        }
        if let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(body.readableBytesView)) { return refusal.error.message }
        let text = String(buffer: body).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

}
