import NIOCore
import NIOHTTP1
import NIOPosix

/// HTTP/1.1 over a Unix domain socket, one connection per exchange: how a node's callers reach
/// its control API. A connection costs little on a local socket, and closing it is how a caller
/// that leaves tells the node (which then drops a backup it was writing for it). Plain NIO, so
/// that a user's package that only calls nodes compiles no TLS stack.
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

    /// Why an exchange ended without a response, besides the socket's own errors.
    package enum Failure: Error, Equatable, Sendable {
        case timedOut
        case closedEarly
        case tooLarge(limit: Int)
    }

    /// The exchange, waiting on the calling thread: for synchronous APIs such as Keychain
    /// Services, which block their caller as `securityd` does. The exchange itself runs on NIO's
    /// event loops, never on Swift's cooperative pool, so a caller blocked here cannot starve it.
    package static func exchangeWaiting(socketPath: String, _ request: Request) throws -> Response {
        try start(socketPath: socketPath, request).futureResult.wait()
    }

    /// The exchange; cancelling the task closes the connection.
    package static func exchange(socketPath: String, _ request: Request) async throws -> Response {
        let response = start(socketPath: socketPath, request)
        return try await withTaskCancellationHandler {
            try await response.futureResult.get()
        } onCancel: {
            response.fail(CancellationError())
        }
    }

    private static func start(socketPath: String, _ request: Request) -> EventLoopPromise<Response> {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let promise = eventLoop.makePromise(of: Response.self)
        // Whatever ends the exchange first wins: a promise ignores the later outcomes, and its
        // end closes the connection.
        let timeout = TimeAmount(request.timeout)
        let deadline = eventLoop.scheduleTask(in: timeout) { promise.fail(Failure.timedOut) }
        promise.futureResult.whenComplete { _ in deadline.cancel() }
        let limit = request.maximumResponseBytes
        ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandlers([
                        NIOHTTPClientResponseAggregator(maxContentLength: limit), ResponseHandler(promise: promise, limit: limit),
                    ])
                }
            }
            .connect(unixDomainSocketPath: socketPath)
            .whenComplete { connected in
                switch connected {
                case .failure(let error): promise.fail(error)
                case .success(let channel):
                    promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
                    send(request, on: channel).whenFailure { promise.fail($0) }
                }
            }
        return promise
    }

    private static func send(_ request: Request, on channel: any Channel) -> EventLoopFuture<Void> {
        var head = HTTPRequestHead(version: .http1_1, method: request.method == .get ? .GET : .POST, uri: request.uri)
        head.headers.add(name: "Host", value: "localhost")
        head.headers.add(name: "Connection", value: "close")
        if request.method == .post {
            head.headers.add(name: "Content-Length", value: "\(request.body?.count ?? 0)")
            if request.body != nil { head.headers.add(name: "Content-Type", value: "application/json") }
        }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body = request.body, !body.isEmpty {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        }
        return channel.writeAndFlush(HTTPClientRequestPart.end(nil))
    }

    /// The one response of the connection, whole.
    private final class ResponseHandler: ChannelInboundHandler {
        typealias InboundIn = NIOHTTPClientResponseFull
        let promise: EventLoopPromise<Response>
        let limit: Int

        init(promise: EventLoopPromise<Response>, limit: Int) {
            self.promise = promise
            self.limit = limit
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let response = unwrapInboundIn(data)
            promise.succeed(
                Response(
                    status: Int(response.head.status.code), statusLine: "\(response.head.status.code) \(response.head.status.reasonPhrase)",
                    body: response.body.map { Array(buffer: $0) } ?? []))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            promise.fail(error as? NIOHTTPObjectAggregatorError == .frameTooLong ? Failure.tooLarge(limit: limit) : error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(Failure.closedEarly)
            context.fireChannelInactive()
        }
    }
}
