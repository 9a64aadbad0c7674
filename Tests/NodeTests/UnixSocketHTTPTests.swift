import Foundation
import Hummingbird
import KeychainTesting
import KeyferryHTTP
import KeyferryThreads
import Logging
import NIOCore
import Testing

/// The client a node's callers use, against a real HTTP server on a Unix socket: what it
/// sends and reads back, and each way an exchange ends without an answer.
@Suite("HTTP over a Unix socket")
struct UnixSocketHTTPTests {
    /// What the server saw of its connections.
    final class Seen: Sendable {
        let arrived = Locked(0)
        let closed = Locked(0)
    }

    /// Runs `body` against a server on a socket in a temporary directory: `/echo` answers a
    /// POST's body with 201, `/big` 2 MiB, `/wait` nothing until its connection closes.
    static func withServer(_ body: (_ socket: String, _ seen: Seen) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kf-http-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("s").path
        let seen = Seen()
        let router = Router()
        router.post("/echo") { request, _ in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            return Response(status: .created, body: .init(byteBuffer: bytes))
        }
        router.get("/big") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(repeating: 0x61, count: 2 << 20))) }
        router.post("/wait") { request, _ -> String in
            seen.arrived.withLock { $0 += 1 }
            defer { seen.closed.withLock { $0 += 1 } }
            return try await request.body.consumeWithCancellationOnInboundClose { _ in
                // Ends when the caller closes the connection (the task is cancelled then).
                while !Task.isCancelled { try await Task.sleep(for: .milliseconds(20)) }
                return "too late"
            }
        }
        let (ready, running) = AsyncStream.makeStream(of: Void.self)
        let app = Application(
            router: router, configuration: .init(address: .unixDomainSocket(path: socket)),
            onServerRunning: { _ in running.yield() }, logger: Logger(label: "unix-socket-test") { _ in SwiftLogNoOpLogHandler() })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService() }
            for await _ in ready { break }
            try await body(socket, seen)
            group.cancelAll()
        }
    }

    static func request(_ method: UnixSocketHTTP.Method, _ uri: String, body: [UInt8]? = nil, timeout: Duration = .seconds(60), limit: Int = 4 << 20)
        -> UnixSocketHTTP.Request
    {
        UnixSocketHTTP.Request(method: method, uri: uri, body: body, timeout: timeout, maximumResponseBytes: limit)
    }

    @Test("a POST's body goes and the answer comes back whole, status and body, waiting or async")
    func exchange() async throws {
        try await Self.withServer { socket, _ in
            let body = Array("{\"item\":\"é\"}".utf8)
            let answer = try await UnixSocketHTTP.exchange(socketPath: socket, Self.request(.post, "/echo", body: body))
            #expect(answer.status == 201 && answer.statusLine == "201 Created")
            #expect(answer.body == body)
            let waited = try await BlockingPool.shared.run { _ in
                try UnixSocketHTTP.exchangeWaiting(socketPath: socket, Self.request(.get, "/big"))
            }
            #expect(waited.status == 200 && waited.body.count == 2 << 20)
        }
    }

    @Test("an answer larger than the caller takes is refused by name, not read whole")
    func tooLarge() async throws {
        try await Self.withServer { socket, _ in
            let failure = await #expect(throws: UnixSocketHTTP.Failure.self) {
                try await UnixSocketHTTP.exchange(socketPath: socket, Self.request(.get, "/big", limit: 1 << 20))
            }
            #expect(failure == .tooLarge(limit: 1 << 20))
            #expect(ConnectionFailure.reason(UnixSocketHTTP.Failure.tooLarge(limit: 1 << 20)) == "the answer is larger than 1 MiB")
        }
    }

    @Test("no answer in time fails by name and closes the connection, so the server hears its caller left")
    func timeout() async throws {
        try await Self.withServer { socket, seen in
            let failure = await #expect(throws: UnixSocketHTTP.Failure.self) {
                try await UnixSocketHTTP.exchange(socketPath: socket, Self.request(.post, "/wait", timeout: .milliseconds(300)))
            }
            #expect(failure == .timedOut)
            #expect(ConnectionFailure.reason(UnixSocketHTTP.Failure.timedOut) == "no answer in time")
            #expect(await eventually { seen.closed.withLock { $0 } == 1 }, "the server's handler was cancelled")
        }
    }

    @Test("a cancelled call closes its connection: the server's work for it is cancelled too")
    func cancelled() async throws {
        try await Self.withServer { socket, seen in
            let call = Task { try await UnixSocketHTTP.exchange(socketPath: socket, Self.request(.post, "/wait")) }
            #expect(await eventually { seen.arrived.withLock { $0 } == 1 })
            call.cancel()
            await #expect(throws: CancellationError.self) { try await call.value }
            #expect(await eventually { seen.closed.withLock { $0 } == 1 })
        }
    }

    @Test("no socket at the path is said in words")
    func noSocket() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("kf-none-\(UUID().uuidString.prefix(8))").path
        do {
            _ = try await UnixSocketHTTP.exchange(socketPath: path, Self.request(.get, "/"))
            Issue.record("an exchange with no socket succeeded")
        } catch {
            #expect(ConnectionFailure.reason(error) == "there is no socket there", "\(error)")
        }
    }
}
