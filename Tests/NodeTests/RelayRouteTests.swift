import Foundation
import Hummingbird
import HummingbirdTesting
import KeyferryCrypto
import Logging
import NIOCore
import SyncWire
import Testing

@testable import Relay
@testable import RelayHTTP

/// The relay's real routes on a temporary SQLite store, called in process: each refusal's status
/// and reason, and that nothing of a refused request is kept.
@Suite("relay routes, in process")
struct RelayRouteTests {
    @Test("health answers; a circle's membership goes in once and comes back by cursor")
    func healthAndMembership() async throws {
        let creator = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let history = CircleHistory(creator: creator, name: "phone")
        let entries = history.entries.map(\.bytes)
        try await withRoutes { client, storage in
            let health = try await client.execute(uri: "/v1/health", method: .get)
            #expect(health.status == .ok)
            #expect(String(buffer: health.body) == "ok\n")

            let first = try await push(client, entries, circle: history.circle, stream: .membership)
            #expect(first.status == .ok)
            #expect(String(buffer: first.body) == "\(entries.count)\n")
            let again = try await push(client, entries, circle: history.circle, stream: .membership)
            #expect(String(buffer: again.body) == "0\n")

            let pulled = try await client.execute(uri: "/v1/circles/\(history.circle)/membership?after=0&limit=10", method: .get)
            #expect(pulled.status == .ok)
            #expect(try RelayWire.decodePull(Array(buffer: pulled.body)).map(\.body) == entries)
            #expect(try await storage.records(circle: history.circle, stream: .membership, after: 0, limit: 10).count == entries.count)
        }
    }

    @Test("bad requests are refused with the status and reason a client shows, and nothing is kept")
    func refusals() async throws {
        let circle = UUID()
        try await withRoutes { client, storage in
            let cases: [(String, HTTPRequest.Method, ByteBuffer?, HTTPResponse.Status, String)] = [
                ("/v1/circles/not-a-uuid/envelopes", .post, ByteBuffer(bytes: RelayWire.encodePush([[1]])), .badRequest, "not a UUID"),
                ("/v1/circles/\(circle)/diary", .post, ByteBuffer(bytes: RelayWire.encodePush([[1]])), .notFound, "streams are"),
                ("/v1/circles/\(circle)/envelopes", .post, ByteBuffer(bytes: [0, 0, 0, 9, 1]), .badRequest, "length-prefixed"),
                ("/v1/circles/\(circle)/envelopes", .post, ByteBuffer(bytes: RelayWire.encodePush([[1]])), .forbidden, "there is no circle"),
                ("/v1/circles/\(circle)/membership", .post, ByteBuffer(bytes: RelayWire.encodePush([[0xFF, 2, 3]])), .forbidden, "membership entry"),
                ("/v1/circles/\(circle)/envelopes?after=-1", .get, nil, .badRequest, "whole numbers"),
                ("/v1/circles/\(circle)/envelopes?limit=0", .get, nil, .badRequest, "whole numbers"),
                ("/v1/circles/not-a-uuid/acknowledgements?through=1", .post, nil, .badRequest, "not a UUID"),
                ("/v1/circles/\(circle)/acknowledgements", .post, nil, .badRequest, "through is the cursor"),
                ("/v1/circles/\(circle)/acknowledgements?through=-3", .post, nil, .badRequest, "through is the cursor"),
                ("/v1/circles/\(circle)/acknowledgements?through=1", .post, nil, .unauthorized, "signed by a member"),
                ("/v1/circles/\(circle)/forgotten-deletions?after=zzz", .get, nil, .badRequest, "an item's UUID"),
                ("/v1/circles/\(circle)/forgotten-deletions?limit=0", .get, nil, .badRequest, "an item's UUID"),
            ]
            for (uri, method, body, status, reason) in cases {
                let response = try await client.execute(uri: uri, method: method, body: body)
                #expect(response.status == status, "\(method) \(uri)")
                #expect(String(buffer: response.body).contains(reason), "\(method) \(uri): \(String(buffer: response.body))")
            }
            for stream in RelayStream.allCases {
                #expect(try await storage.records(circle: circle, stream: stream, after: 0, limit: 10).isEmpty)
            }
        }
    }

    @Test("a push of envelopes without a member's signature is 401 and kept nowhere")
    func unsignedPush() async throws {
        let creator = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        let history = CircleHistory(creator: creator, name: "phone")
        try await withRoutes { client, storage in
            _ = try await push(client, history.entries.map(\.bytes), circle: history.circle, stream: .membership)
            let response = try await push(client, [[1, 2, 3]], circle: history.circle, stream: .envelopes)
            #expect(response.status == .unauthorized)
            #expect(String(buffer: response.body).contains("Keyferry-Signer"))
            #expect(try await storage.records(circle: history.circle, stream: .envelopes, after: 0, limit: 10).isEmpty)
        }
    }

    // MARK: Support

    private func withRoutes(_ test: @escaping @Sendable (any TestClientProtocol, SQLiteRelayStorage) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-relay-routes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteRelayStorage(directory: directory)
        let router = Router()
        RelayServer.routes(router, keeper: RelayKeeper(storage: storage), logger: Logger(label: "keyferry.test") { _ in SwiftLogNoOpLogHandler() })
        try await Application(router: router).test(.router) { client in try await test(client, storage) }
    }

    private func push(_ client: any TestClientProtocol, _ bodies: [[UInt8]], circle: UUID, stream: RelayStream) async throws -> TestResponse {
        try await client.execute(uri: "/v1/circles/\(circle)/\(stream.rawValue)", method: .post, body: ByteBuffer(bytes: RelayWire.encodePush(bodies)))
    }
}
