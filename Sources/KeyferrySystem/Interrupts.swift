import Foundation
import KeyferryThreads
package import Logging
package import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

extension ProcessControl {
    /// Runs `handler` on SIGINT or SIGTERM instead of dying at once, so that what the process
    /// started can be stopped first. Handling lasts while the returned value is kept; with no
    /// handler left, the signals kill the process again.
    ///
    /// Not a dispatch signal source: through one, a busy process (every core restoring, say)
    /// was seen to miss Ctrl-C on Linux. Here a plain handler, on whichever thread the signal
    /// lands, writes one byte to a pipe, and a thread of its own reads it and runs the handlers.
    package static func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> AnyObject {
        Interrupts.shared.register(handler)
    }
}

/// The handlers waiting for SIGINT or SIGTERM, and the pipe and thread that call them.
private final class Interrupts: Sendable {
    static let shared = Interrupts()

    private let handlers = Locked<(next: Int, all: [Int: @Sendable () -> Void])>((0, [:]))
    private let readEnd: Int32

    private init() {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { fatalError("cannot create the pipe that carries interrupt signals: \(SystemError.last())") }
        readEnd = ends[0]
        interruptPipeWriteEnd = ends[1]
        Thread.detachNewThread { [self] in
            var signalNumber: UInt8 = 0
            while true {
                let count = read(readEnd, &signalNumber, 1)
                if count == 1 {
                    for handler in handlers.withLock({ Array($0.all.values) }) { handler() }
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// A handler's registration, which ends with it.
    private final class Registration {
        let end: () -> Void
        init(end: @escaping () -> Void) { self.end = end }
        deinit { end() }
    }

    func register(_ handler: @escaping @Sendable () -> Void) -> AnyObject {
        let key = handlers.withLock { handlers in
            if handlers.all.isEmpty { Self.catchSignals(true) }
            handlers.next += 1
            handlers.all[handlers.next] = handler
            return handlers.next
        }
        return Registration { [self] in
            handlers.withLock { handlers in
                handlers.all[key] = nil
                if handlers.all.isEmpty { Self.catchSignals(false) }
            }
        }
    }

    private static func catchSignals(_ catching: Bool) {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(
                signalNumber,
                catching
                    ? { number in
                        // Only what is safe inside a signal handler: one write.
                        var byte = UInt8(truncatingIfNeeded: number)
                        _ = write(interruptPipeWriteEnd, &byte, 1)
                    } : SIG_DFL)
        }
    }
}

/// Where the signal handler writes; set once, before any handler is installed.
nonisolated(unsafe) private var interruptPipeWriteEnd: Int32 = -1

extension ProcessControl {
    /// Runs `services` (a server, the loops beside it) until SIGINT or SIGTERM, then shuts them
    /// down gracefully: the one way every Keyferry process takes those signals (the handler
    /// above, not a dispatch signal source), for a node and a relay as for a command.
    package static func runUntilInterrupted(_ services: [any Service], logger: Logger) async throws {
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [], logger: logger))
        let interrupts = onInterrupt { Task { await group.triggerGracefulShutdown() } }
        defer { withExtendedLifetime(interrupts) {} }
        try await group.run()
    }
}
