import Foundation
import Hummingbird
import HummingbirdTesting
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import KeyferryThreads
import Logging
import NIOCore
import NodeControl
import Testing

@testable import Node

/// The control API keeps its word: request bodies a client of an earlier release sends,
/// recorded with that release's answers (Tests/Fixtures/node-requests), get the same answers
/// from today's node, and every route is both in the recording and in Protocol/node.md.
@Suite("control API: the requests of earlier releases")
struct RecordedRequestsTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
    static let recordings = repository.appendingPathComponent("Tests/Fixtures/node-requests")

    /// Answers' values that differ from run to run: times, identifiers, keys, digests.
    static let volatile: Set<String> = [
        "pid", "now", "creationDate", "modificationDate", "uuid", "persistentRef", "id", "createdAt", "signingKey", "encryptionKey", "at",
        "biometryDomainState", "graceRemaining", "advanced", "circle", "head", "share", "entry", "lastExchange", "sha256", "digest",
        "startedAt", "finishedAt", "elapsed", "seconds", "bytes", "compressedBytes", "archiveCreated",
    ]

    @Test("each recorded release's requests, sent in order to a new device, are answered as that release answered them")
    func recordedReleases() async throws {
        let files = try FileManager.default.contentsOfDirectory(at: Self.recordings, includingPropertiesForKeys: nil).filter { $0.pathExtension == "json" }
        try #require(!files.isEmpty)
        let recording = ProcessInfo.processInfo.environment["KEYFERRY_RECORD_REQUESTS"] == "1"
        for file in files {
            var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
            let exchanges = try #require(document["exchanges"] as? [[String: Any]])
            let answered = try await Self.replay(exchanges)
            if recording {
                document["exchanges"] = answered
                try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys]).write(to: file)
                continue
            }
            for (index, (then, now)) in zip(exchanges, answered).enumerated() {
                let route = "\(file.lastPathComponent) #\(index) \(then["route"] ?? "")"
                #expect(then["status"] as? Int == now["status"] as? Int, "\(route): status")
                #expect(Self.comparable(then["answer"]) == Self.comparable(now["answer"]), "\(route): answer")
            }
        }
    }

    @Test("every route the node serves is recorded, and listed in Protocol/node.md")
    func everyRoute() throws {
        let served = try Self.servedRoutes()
        #expect(served.count > 30)
        let protocolText = try String(contentsOf: Self.repository.appendingPathComponent("Protocol/node.md"), encoding: .utf8)
        // A route added since a recording is recorded in a recording of its own.
        var recorded: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(at: Self.recordings, includingPropertiesForKeys: nil) where file.pathExtension == "json" {
            let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
            recorded.formUnion((document["exchanges"] as? [[String: Any]] ?? []).compactMap { $0["route"] as? String })
        }
        #expect(served.subtracting(recorded).isEmpty, "no recording holds \(served.subtracting(recorded).sorted())")
        for route in served.sorted() {
            #expect(protocolText.contains("| `\(route)`"), "Protocol/node.md has no row for \(route)")
        }
    }

    /// The routes as their constants name them (`Self("add")`), in the files that declare them.
    static func servedRoutes() throws -> Set<String> {
        var routes: Set<String> = []
        for path in ["Sources/NodeControl/NodeAPI.swift", "Sources/Node/NodeRoutes.swift"] {
            let text = try String(contentsOf: repository.appendingPathComponent(path), encoding: .utf8)
            for match in text.matches(of: /Self\("([a-z\/-]+)"/) { routes.insert(String(match.1)) }
        }
        return routes
    }

    /// Sends each exchange's body (placeholders filled) and returns the exchanges with the
    /// status and the canonical answer they got.
    static func replay(_ exchanges: [[String: Any]]) async throws -> [[String: Any]] {
        let fixture = try TestDevice()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-recorded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        // The powered-off device a transfer fills.
        let target = try Device.create(
            at: scratch.appendingPathComponent("target"), options: DeviceOptions(name: "target", passcode: fixture.passcode, passcodeHashing: .minimum))
        target.powerOff()
        let placeholders = ["$TMP": scratch.path, "$PASSCODE": fixture.passcode ?? ""]
        let logger = Logger(label: "keyferry.test") { _ in SwiftLogNoOpLogHandler() }
        let sync = await NodeSync(device: fixture.device, logger: logger)
        let application = Application(router: NodeServer.router(device: fixture.device, sync: sync, logger: logger))
        struct Request: Sendable {
            var method: String
            var route: String
            var body: String?
        }
        let requests = exchanges.map { exchange in
            var body = exchange["body"].map { String(decoding: try! JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
            for (name, value) in placeholders { body = body?.replacingOccurrences(of: name, with: value) }
            return Request(method: exchange["method"] as? String ?? "POST", route: exchange["route"] as? String ?? "", body: body)
        }
        let answers = Locked<[(status: Int, answer: String)]>([])
        try await application.test(.router) { client in
            for request in requests {
                let response = try await client.execute(
                    uri: "/\(NodeAPI.version)/\(request.route)", method: request.method == "GET" ? .get : .post,
                    headers: [.contentType: "application/json"], body: request.body.map { ByteBuffer(string: $0) })
                var answer = String(decoding: Data(response.body.readableBytesView), as: UTF8.self)
                for (name, value) in placeholders where !value.isEmpty {
                    // JSON may escape the slashes of a path.
                    answer = answer.replacingOccurrences(of: value, with: name)
                        .replacingOccurrences(of: value.replacingOccurrences(of: "/", with: "\\/"), with: name)
                }
                let status = Int(response.status.code)
                answers.withLock { [answer] in $0.append((status, answer)) }
            }
        }
        withExtendedLifetime(fixture) {}
        return zip(exchanges, answers.withLock { $0 }).map { exchange, got in
            var recorded = exchange
            recorded["status"] = got.status
            recorded["answer"] = canonical(try? JSONSerialization.jsonObject(with: Data(got.answer.utf8), options: [.fragmentsAllowed])) ?? got.answer
            return recorded
        }
    }

    /// The answer with its volatile values replaced by their kind, so two runs compare equal.
    static func canonical(_ value: Any?) -> Any? {
        switch value {
        case let object as [String: Any]:
            return object.reduce(into: [String: Any]()) { out, entry in
                out[entry.key] = volatile.contains(entry.key) && !(entry.value is NSNull) ? "<\(entry.key)>" : canonical(entry.value)
            }
        case let array as [Any]: return array.map { canonical($0) ?? NSNull() }
        default: return value
        }
    }
}

extension RecordedRequestsTests {
    /// A canonical answer as text, to compare.
    static func comparable(_ value: Any?) -> String {
        guard let value = canonical(value) as Any?, JSONSerialization.isValidJSONObject([value]) else { return "\(String(describing: value))" }
        return String(decoding: (try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys])) ?? Data(), as: UTF8.self)
    }
}
