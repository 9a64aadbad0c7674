import Foundation
import Glibc
import Synchronization

/// HTTP/1.1 over a Unix domain socket, one connection per exchange: how a node's callers reach
/// its control API. A connection costs little on a local socket, and closing it is how a caller
/// that leaves tells the node (which then drops a backup it was writing for it).
///
/// Plain blocking socket calls, no event loop: a command that makes one call and exits (`item
/// get`) spends most of its life starting up, and bringing up an event loop group and a channel
/// pipeline cost more than the exchange itself. An async exchange waits on a thread of its own,
/// never on Swift's cooperative pool, nor on a shared pool whose threads long work may hold
/// past the exchange's deadline.
package enum UnixSocketHTTP {
    package enum Method: Sendable {
        case get, post
    }

    package struct Request: Sendable {
        package var method: Method
        /// The path and query, such as `/v1/status`.
        package var uri: String
        /// Sent as `application/json`.
        package var body: [UInt8]?
        /// The whole exchange's, connecting included.
        package var timeout: Duration
        package var maximumResponseBytes: Int

        package init(method: Method, uri: String, body: [UInt8]?, timeout: Duration, maximumResponseBytes: Int) {
            self.method = method
            self.uri = uri
            self.body = body
            self.timeout = timeout
            self.maximumResponseBytes = maximumResponseBytes
        }
    }

    package struct Response: Sendable {
        /// The status code, such as 200.
        package let status: Int
        /// The status line's words, such as `200 OK`.
        package let statusLine: String
        package let body: [UInt8]
    }

    /// Why an exchange ended without a response.
    package enum Failure: Error, Equatable, Sendable {
        case timedOut
        case closedEarly
        case tooLarge(limit: Int)
        /// A socket call failed with `errno`.
        case system(call: String, errno: Int32)
        /// What came back is not an HTTP/1.1 response.
        case malformed(String)
    }

    /// The exchange, waiting on the calling thread: for synchronous APIs such as Keychain
    /// Services, which block their caller as `securityd` does.
    package static func exchangeWaiting(socketPath: String, _ request: Request) throws -> Response {
        let connection = try Connection(deadline: .now + request.timeout)
        defer { connection.close() }
        try connection.connect(to: socketPath)
        return try connection.exchange(request)
    }

    /// The exchange; cancelling the task closes the connection.
    package static func exchange(socketPath: String, _ request: Request) async throws -> Response {
        let connection = try Connection(deadline: .now + request.timeout)
        defer { connection.close() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    Thread.detachNewThread {
                        continuation.resume(
                            with: Result {
                                try connection.connect(to: socketPath)
                                return try connection.exchange(request)
                            })
                    }
                }
            } onCancel: {
                connection.shutDown()
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
    }

    /// One socket and its deadline.
    private final class Connection: Sendable {
        private let descriptor: Int32
        private let deadline: ContinuousClock.Instant
        private let closed = Atomic(false)
        private let cancelled = Atomic(false)

        init(deadline: ContinuousClock.Instant) throws {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw Failure.system(call: "socket", errno: errno) }
            self.descriptor = descriptor
            self.deadline = deadline
        }

        func connect(to path: String) throws {
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            let capacity = MemoryLayout.size(ofValue: address.sun_path)
            guard bytes.count < capacity else { throw Failure.system(call: "connect", errno: ENAMETOOLONG) }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else { throw Failure.system(call: "connect", errno: errno) }
        }

        /// Ends both directions, waking a call blocked on the socket; the descriptor stays
        /// open until `close`, so it cannot be reused under the blocked call. An exchange not
        /// yet waiting stops at its first wait.
        func shutDown() {
            cancelled.store(true, ordering: .relaxed)
            _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
        }

        func close() {
            guard !closed.exchange(true, ordering: .relaxed) else { return }
            _ = Glibc.close(descriptor)
        }

        func exchange(_ request: Request) throws -> Response {
            try sendAll(Self.encoded(request))
            var reader = ResponseReader(limit: request.maximumResponseBytes)
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                try wait(for: Int16(POLLIN))
                let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    throw Failure.system(call: "recv", errno: errno)
                }
                if let response = try reader.take(buffer[0..<count], atEnd: count == 0) { return response }
                if count == 0 { throw Failure.closedEarly }
            }
        }

        private static func encoded(_ request: Request) -> [UInt8] {
            var head = "\(request.method == .get ? "GET" : "POST") \(request.uri) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            if request.method == .post {
                head += "Content-Length: \(request.body?.count ?? 0)\r\n"
                if request.body != nil { head += "Content-Type: application/json\r\n" }
            }
            head += "\r\n"
            return Array(head.utf8) + (request.body ?? [])
        }

        private func sendAll(_ bytes: [UInt8]) throws {
            var sent = 0
            while sent < bytes.count {
                try wait(for: Int16(POLLOUT))
                let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                if count < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    // The other side closed: its answer, if it sent one, is still to be read.
                    if errno == EPIPE || errno == ECONNRESET { return }
                    throw Failure.system(call: "send", errno: errno)
                }
                sent += count
            }
        }

        /// Waits until the socket is ready for `events`, or throws `timedOut` at the deadline.
        private func wait(for events: Int16) throws {
            while true {
                guard !cancelled.load(ordering: .relaxed) else { throw Failure.closedEarly }
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { throw Failure.timedOut }
                let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                var poll = pollfd(fd: descriptor, events: events, revents: 0)
                let ready = Glibc.poll(&poll, 1, milliseconds)
                if ready > 0 { return }
                if ready < 0 && errno != EINTR { throw Failure.system(call: "poll", errno: errno) }
            }
        }
    }
}

/// Reads one HTTP/1.1 response from the bytes as they arrive: the status line and headers, then
/// a body of `Content-Length` bytes, chunked, or to the end of the connection.
struct ResponseReader {
    let limit: Int
    private var received: [UInt8] = []
    /// Where the search for the end of the head goes on from.
    private var scanned = 0
    private var head: Head?

    struct Head {
        var status: Int
        var statusLine: String
        var framing: Framing
        var bodyStart: Int
    }

    enum Framing: Equatable {
        case length(Int)
        case chunked
        case toEnd
    }

    init(limit: Int) { self.limit = limit }

    /// The response once `bytes` complete it; nil while more is to come.
    mutating func take(_ bytes: ArraySlice<UInt8>, atEnd: Bool) throws -> UnixSocketHTTP.Response? {
        received += bytes
        if head == nil {
            guard let end = endOfHead() else {
                // A head is a few hundred bytes; one larger than the limit is not an answer.
                guard received.count <= max(limit, 64 << 10) else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
                return nil
            }
            head = try Self.parseHead(received[..<end], bodyStart: end + 4)
        }
        guard let head else { return nil }
        let body = received[head.bodyStart...]
        func response(_ bytes: [UInt8]) throws -> UnixSocketHTTP.Response {
            guard bytes.count <= limit else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
            return UnixSocketHTTP.Response(status: head.status, statusLine: head.statusLine, body: bytes)
        }
        switch head.framing {
        case .length(let length):
            guard length <= limit else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
            return body.count >= length ? try response(Array(body.prefix(length))) : nil
        case .toEnd:
            guard body.count <= limit else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
            return atEnd ? try response(Array(body)) : nil
        case .chunked:
            // Each chunk costs a size line: a body this much larger than the limit holds more.
            guard body.count <= limit + limit / 8 + 1024 else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
            // Decoded once, when the last chunk and the empty trailer have arrived.
            guard atEnd || body.suffix(5).elementsEqual("0\r\n\r\n".utf8) else { return nil }
            guard let decoded = try Self.dechunked(body, limit: limit) else { return nil }
            return try response(decoded)
        }
    }

    private mutating func endOfHead() -> Int? {
        guard received.count >= 4 else { return nil }
        for index in scanned...(received.count - 4)
        where received[index] == 13 && received[index + 1] == 10 && received[index + 2] == 13 && received[index + 3] == 10 {
            return index
        }
        scanned = received.count - 3
        return nil
    }

    private static func parseHead(_ bytes: ArraySlice<UInt8>, bodyStart: Int) throws -> Head {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.first ?? ""
        let words = statusLine.split(separator: " ", maxSplits: 2)
        guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = Int(words[1]), (100...599).contains(status) else {
            throw UnixSocketHTTP.Failure.malformed("the status line \"\(statusLine.prefix(80))\"")
        }
        var framing = Framing.toEnd
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmed
            if name == "transfer-encoding", value.lowercased().contains("chunked") {
                framing = .chunked
            } else if name == "content-length", framing != .chunked {
                guard let length = Int(value), length >= 0 else {
                    throw UnixSocketHTTP.Failure.malformed("the Content-Length \"\(value.prefix(40))\"")
                }
                framing = .length(length)
            }
        }
        return Head(status: status, statusLine: words.dropFirst().joined(separator: " "), framing: framing, bodyStart: bodyStart)
    }

    /// The body a chunked encoding carries once its last chunk arrived; nil before.
    private static func dechunked(_ bytes: ArraySlice<UInt8>, limit: Int) throws -> [UInt8]? {
        var body: [UInt8] = []
        var index = bytes.startIndex
        while true {
            guard let lineEnd = lineEnd(bytes, from: index) else { return nil }
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first.map { String($0).trimmed } ?? ""
            guard let size = Int(sizeText, radix: 16), size >= 0 else {
                throw UnixSocketHTTP.Failure.malformed("the chunk size \"\(sizeText.prefix(20))\"")
            }
            guard body.count + size <= limit else { throw UnixSocketHTTP.Failure.tooLarge(limit: limit) }
            let start = lineEnd + 2
            if size == 0 { return body }
            guard bytes.endIndex >= start + size + 2 else { return nil }
            body += bytes[start..<(start + size)]
            index = start + size + 2
        }
    }

    private static func lineEnd(_ bytes: ArraySlice<UInt8>, from start: Int) -> Int? {
        var index = start
        while index + 1 < bytes.endIndex {
            if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }
}

extension StringProtocol {
    /// Without the spaces and tabs around it, as HTTP reads a header's value (its optional
    /// whitespace; Foundation's `.whitespaces` would take every Unicode space as well).
    fileprivate var trimmed: String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(String(drop(while: blank).reversed().drop(while: blank).reversed()))
    }
}
