import Foundation
import Glibc
import Testing

@testable import KeyferryHTTP

/// The node's client reads what a server sends as it arrives, in any pieces, and refuses what is
/// not an answer: tested on responses it did not write, and against a server that misbehaves.
@Suite("HTTP over a Unix socket")
struct UnixSocketHTTPTests {
    /// `text` fed to a reader `piece` bytes at a time, then the end of the connection.
    static func read(_ text: String, piece: Int, limit: Int = 1 << 20) throws -> UnixSocketHTTP.Response? {
        var reader = ResponseReader(limit: limit)
        let bytes = Array(text.utf8)
        for start in stride(from: 0, to: bytes.count, by: piece) {
            if let response = try reader.take(bytes[start..<min(start + piece, bytes.count)], atEnd: false) { return response }
        }
        return try reader.take([], atEnd: true)
    }

    @Test("a response in any pieces: by length, chunked, or to the end of the connection", arguments: [1, 3, 7, 4096])
    func framings(piece: Int) throws {
        let byLength = try #require(try Self.read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello", piece: piece))
        #expect(byLength.status == 200 && byLength.statusLine == "200 OK" && byLength.body == Array("hello".utf8))

        let chunked = try #require(
            try Self.read(
                "HTTP/1.1 404 Not Found\r\ntransfer-encoding:  chunked \r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", piece: piece))
        #expect(chunked.status == 404 && chunked.statusLine == "404 Not Found" && chunked.body == Array("hello world".utf8))

        let toEnd = try #require(try Self.read("HTTP/1.0 500 Internal Server Error\r\n\r\nbroken", piece: piece))
        #expect(toEnd.status == 500 && toEnd.body == Array("broken".utf8))
    }

    @Test("what is not an answer is refused, naming why: a bad status line, length or chunk size; more than the limit")
    func refusals() throws {
        #expect(throws: UnixSocketHTTP.Failure.malformed("the status line \"SSH-2.0-OpenSSH\"")) {
            try Self.read("SSH-2.0-OpenSSH\r\n\r\n", piece: 64)
        }
        #expect(throws: UnixSocketHTTP.Failure.malformed("the Content-Length \"-1\"")) {
            try Self.read("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", piece: 64)
        }
        #expect(throws: UnixSocketHTTP.Failure.malformed("the chunk size \"zz\"")) {
            try Self.read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n0\r\n\r\n", piece: 64)
        }
        #expect(throws: UnixSocketHTTP.Failure.tooLarge(limit: 4)) {
            try Self.read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", piece: 64, limit: 4)
        }
        #expect(throws: UnixSocketHTTP.Failure.tooLarge(limit: 4)) {
            try Self.read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", piece: 3, limit: 4)
        }
        #expect(throws: UnixSocketHTTP.Failure.tooLarge(limit: 4)) {
            try Self.read("HTTP/1.1 200 OK\r\n\r\nhello", piece: 64, limit: 4)
        }
        // An endless head is refused once it passes what any head needs.
        #expect(throws: UnixSocketHTTP.Failure.tooLarge(limit: 4)) {
            try Self.read("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 70_000), piece: 4096, limit: 4)
        }
        // Cut short: no response.
        #expect(try Self.read("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", piece: 64) == nil)
    }

    @Test("against a server: the request it receives, its answer, a server that hangs up or stays silent, no socket at all")
    func exchanges() async throws {
        let request = UnixSocketHTTP.Request(method: .post, uri: "/v1/item/copy", body: Array("{}".utf8), timeout: .seconds(30), maximumResponseBytes: 1 << 20)
        let answering = try OneShotServer { received in
            #expect(received.hasPrefix("POST /v1/item/copy HTTP/1.1\r\n") && received.contains("Content-Length: 2\r\n") && received.hasSuffix("\r\n\r\n{}"))
            return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
        }
        let response = try await UnixSocketHTTP.exchange(socketPath: answering.path, request)
        #expect(response.status == 200 && response.body == Array("{}".utf8))

        let hangingUp = try OneShotServer { _ in nil }
        await #expect(throws: UnixSocketHTTP.Failure.closedEarly) { try await UnixSocketHTTP.exchange(socketPath: hangingUp.path, request) }

        // A deadline, not a wait: the silent server holds the connection until the client gives up.
        var short = request
        short.timeout = .milliseconds(200)
        let silent = try OneShotServer(silent: true) { _ in nil }
        #expect(throws: UnixSocketHTTP.Failure.timedOut) { try UnixSocketHTTP.exchangeWaiting(socketPath: silent.path, short) }

        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("kf-none-\(UUID().uuidString.prefix(8)).sock").path
        let error = await #expect(throws: UnixSocketHTTP.Failure.self) { try await UnixSocketHTTP.exchange(socketPath: missing, request) }
        #expect(error.flatMap(ConnectionFailure.reason) == "there is no socket there")
    }
}

/// A Unix socket server for one connection: it reads the request (up to the end of its body, by
/// its Content-Length), then sends `answer`'s text, if any, and hangs up; or, `silent`, holds the
/// connection open until the client hangs up.
final class OneShotServer: Sendable {
    let path: String
    private let listener: Int32

    init(silent: Bool = false, _ answer: @escaping @Sendable (String) -> String?) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("kf-http-\(UUID().uuidString.prefix(8)).sock").path
        self.path = path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        self.listener = listener
        let thread = Thread {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return }
                received += buffer[0..<count]
                let text = String(decoding: received, as: UTF8.self)
                guard let headEnd = text.range(of: "\r\n\r\n") else { continue }
                let length =
                    text[..<headEnd.lowerBound].split(separator: "\r\n").first { $0.hasPrefix("Content-Length: ") }
                    .flatMap { Int($0.dropFirst(16)) } ?? 0
                if text.utf8.count - text.utf8.distance(from: text.startIndex, to: headEnd.upperBound) >= length { break }
            }
            if silent {
                _ = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                return
            }
            if let reply = answer(String(decoding: received, as: UTF8.self)) {
                _ = Array(reply.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
        thread.start()
    }

    deinit {
        close(listener)
        unlink(path)
    }
}
