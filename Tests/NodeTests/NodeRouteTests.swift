import Foundation
import Hummingbird
import HummingbirdTesting
import KeychainModel
import KeychainStore
import KeychainTesting
import Logging
import NIOCore
import NodeControl
import SyncWire
import Testing

@testable import Node

/// The control API's real router on a test device, called in process: what each failure's
/// status and body are, and that the client rebuilds from the body the very error the node threw.
@Suite("control API routes, in process")
struct NodeRouteTests {
    private let app = TestDevice.appID

    @Test("an item added through the API reads back; a missing one is 409 with Apple's status, rebuilt as a KeychainError")
    func keychainFailures() async throws {
        try await withRoutes { client in
            let added = try await post(client, .add, NodeAPI.Add(app: app, item: .password(account: "alice")))
            #expect(added.status == .ok)

            let missing = try await post(client, .copy, NodeAPI.Search(app: app, query: .password(account: "bob")))
            #expect(missing.status == .conflict)
            let failure = try decode(NodeAPI.Failure.self, missing)
            #expect(failure.error.domain == "keychain" && failure.error.codeName == "-25300" && failure.error.kind == .keychain)
            let rebuilt = try #require(failure.error as? KeychainError)
            #expect(rebuilt.status == .itemNotFound)

            let many = try await post(client, .copyMany, NodeAPI.SearchMany(app: app, queries: [.password(account: "alice"), .password(account: "bob")]))
            #expect(many.status == .ok)
            let results = try decode(NodeAPI.FoundMany.self, many).results
            #expect(try results[0].get().first?.data == Data("secret".utf8))
            #expect(throws: KeychainError.self) { try results[1].get() }
        }
    }

    @Test("a circle failure is 422 with its code, and the client gets the CircleError back")
    func circleFailures() async throws {
        try await withRoutes { client in
            let stranger = NodeAPI.Peer(name: "tablet", signingKey: String(repeating: "ab", count: 32), encryptionKey: String(repeating: "cd", count: 32))
            let response = try await post(client, .circleVouch, NodeAPI.Vouch(peer: stranger))
            #expect(response.status == .unprocessableContent)
            let failure = try decode(NodeAPI.Failure.self, response)
            #expect(failure.error.domain == "circle")
            #expect(failure.error.codeName == CircleError.Code.notInCircle.rawValue)
            let rebuilt = try #require(failure.error as? CircleError)
            #expect(rebuilt.code == .notInCircle)
            #expect(!rebuilt.isRetryable)
        }
    }

    @Test("a member whose sync.json cannot be read says so, naming the file, for its status and every circle call, rather than that it is in no circle")
    func unreadableSyncState() async throws {
        let fixture = try TestDevice()
        let state = fixture.device.directory.appendingPathComponent("sync.json")
        try Data("{ not a sync state".utf8).write(to: state)
        try await withRoutes(on: fixture) { client in
            for response in [
                try await client.execute(uri: "/\(NodeAPI.version)/\(NodeAPI.Route<NodeAPI.Empty, NodeAPI.CircleStatus>.circleStatus.path)", method: .get),
                try await client.execute(uri: "/\(NodeAPI.version)/\(NodeAPI.Route<NodeAPI.Empty, NodeAPI.SyncStatus>.syncStatus.path)", method: .get),
                try await post(client, .syncNow, NodeAPI.SyncNow()),
            ] {
                #expect(response.status == .unprocessableContent)
                let error = try #require(try decode(NodeAPI.Failure.self, response).error as? CircleError)
                #expect(error.code == .unreadableState && error.message.contains(state.path), "\(error)")
            }
        }
        #expect(try Data(contentsOf: state) == Data("{ not a sync state".utf8), "the file is left as it was")
    }

    @Test("a device failure keeps its code: an app that is not installed")
    func deviceFailures() async throws {
        try await withRoutes { client in
            let response = try await post(client, .add, NodeAPI.Add(app: "com.example.absent", item: .password(account: "alice")))
            #expect(response.status == .unprocessableContent)
            let rebuilt = try #require(try decode(NodeAPI.Failure.self, response).error as? DeviceError)
            #expect(rebuilt.code == .appNotInstalled)
        }
    }

    @Test("an archive failure comes back as the ArchiveError, case and all")
    func archiveFailures() async throws {
        let taken = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-route-\(UUID().uuidString)")
        try Data("mine".utf8).write(to: taken)
        defer { try? FileManager.default.removeItem(at: taken) }
        try await withRoutes { client in
            let response = try await post(client, .backup, NodeAPI.Backup(path: taken.path, password: nil))
            #expect(response.status == .unprocessableContent)
            let failure = try decode(NodeAPI.Failure.self, response)
            #expect(failure.error.domain == "archive")
            let rebuilt = try #require(failure.error as? ArchiveError)
            guard case .exists = rebuilt else {
                Issue.record("expected exists, got \(rebuilt)")
                return
            }
        }
        #expect(try Data(contentsOf: taken) == Data("mine".utf8))
    }

    @Test("a read from a client written before kSecUseAuthenticationUISkip (no skipsItemsNeedingAuthentication) is answered as before")
    func bodyOfAnEarlierClient() async throws {
        try await withRoutes { client in
            _ = try await post(client, .add, NodeAPI.Add(app: app, item: .password(account: "alice")))
            // Today's body, less the field added after the route was published.
            var body = try #require(
                try JSONSerialization.jsonObject(with: NodeAPI.encoder.encode(NodeAPI.Search(app: app, query: .password(account: "alice")))) as? [String: Any])
            var query = try #require(body["query"] as? [String: Any])
            var authentication = try #require(query["authentication"] as? [String: Any])
            #expect(authentication.removeValue(forKey: "skipsItemsNeedingAuthentication") != nil, "the field this checks is sent today")
            query["authentication"] = authentication
            body["query"] = query
            let response = try await client.execute(
                uri: "/v1/copy", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
            #expect(response.status == .ok)
            #expect(try decode(NodeAPI.Items.self, response).items.first?.data == Data("secret".utf8))
        }
    }

    @Test("a body that is not the route's JSON is 400 in the request domain, and changes nothing")
    func malformedBodies() async throws {
        try await withRoutes { client in
            for body in ["", "{", #"{"app": 7}"#, #"{"app": "com.example.app", "item": {"class": "genp"}}"#] {
                let response = try await client.execute(
                    uri: "/v1/add", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "body \(body)")
                #expect((try decode(NodeAPI.Failure.self, response).error as? NodeError)?.code == .invalidRequest)
            }
            let listed = try await post(client, .list, NodeAPI.List(app: app))
            #expect(try decode(NodeAPI.Items.self, listed).items.isEmpty)
        }
    }

    @Test("a body larger than any item could need is refused before it is read whole")
    func oversizedBodies() async throws {
        try await withRoutes { client in
            let huge = ByteBuffer(repeating: UInt8(ascii: "a"), count: 4 * NewItem.maximumDataBytes + 1)
            let response = try await client.execute(uri: "/v1/add", method: .post, headers: [.contentType: "application/json"], body: huge)
            #expect(response.status == .badRequest)
            #expect(try decode(NodeAPI.Failure.self, response).error.message.contains("larger than a node accepts"))
        }
    }

    @Test("a failure is one JSON shape any client reads, and a domain this client does not know keeps its kind")
    func failureShape() throws {
        let wire = try NodeAPI.encoder.encode(NodeAPI.Failure(DeviceError(.appNotInstalled, "com.example.absent is not installed.")))
        let fields = try #require(try JSONSerialization.jsonObject(with: wire) as? [String: Any])
        #expect(fields["domain"] as? String == "device")
        #expect(fields["code"] as? String == "appNotInstalled")
        #expect(fields["kind"] as? String == "notFound")
        #expect(fields["retryable"] as? Bool == false)
        #expect(fields["message"] as? String == "com.example.absent is not installed.")

        let newer = Data(
            #"{"domain": "hologram", "code": "flicker", "kind": "unavailable", "message": "the hologram flickers.", "retryable": true, "detail": {"x": 1}}"#
                .utf8)
        let remote = try #require(try NodeAPI.decoder.decode(NodeAPI.Failure.self, from: newer).error as? RemoteError)
        #expect(remote.domain == "hologram" && remote.codeName == "flicker" && remote.kind == .unavailable && remote.isRetryable)
        #expect(remote.message == "the hologram flickers.")
    }

    // MARK: Support

    private func withRoutes(on fixture: TestDevice? = nil, _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let fixture = try fixture ?? TestDevice()
        let logger = Logger(label: "keyferry.test") { _ in SwiftLogNoOpLogHandler() }
        let sync = await NodeSync(device: fixture.device, logger: logger)
        let application = Application(router: NodeServer.router(device: fixture.device, sync: sync, logger: logger))
        try await application.test(.router) { client in try await test(client) }
        withExtendedLifetime(fixture) {}
    }

    private func post<Body, Answer>(_ client: any TestClientProtocol, _ route: NodeAPI.Route<Body, Answer>, _ body: Body) async throws -> TestResponse {
        try await client.execute(
            uri: "/\(NodeAPI.version)/\(route.path)", method: .post, headers: [.contentType: "application/json"],
            body: ByteBuffer(bytes: try NodeAPI.encoder.encode(body)))
    }

    private func decode<Value: Decodable>(_ type: Value.Type, _ response: TestResponse) throws -> Value {
        try NodeAPI.decoder.decode(type, from: Data(response.body.readableBytesView))
    }
}
