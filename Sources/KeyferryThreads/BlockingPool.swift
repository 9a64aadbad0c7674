import NIOPosix
import Synchronization

/// Threads for blocking work (SQLite, password hashing, sealing, a backup), so that it never
/// runs on Swift's cooperative pool: that pool has a thread per core, and one slow call there
/// holds up every task of the process (a node's socket, its sync loop) until it returns.
///
/// Two kinds, both NIO's thread pool: `shared`, a thread per core for the process's short calls,
/// and pools of a few threads that an owner starts for its long jobs and stops when done (a
/// device's backups and transfers), so that long jobs are bounded and calls still find a thread.
package struct BlockingPool: Sendable {
    private let threads: NIOThreadPool

    /// The process's pool for short calls: NIO's own, started on first use, never stopped.
    package static let shared = BlockingPool(threads: NIOThreadPool.singleton)

    private init(threads: NIOThreadPool) { self.threads = threads }

    /// A pool of `count` threads of its own, started; its owner stops it (`stop`).
    package static func started(threads count: Int) -> BlockingPool {
        let threads = NIOThreadPool(numberOfThreads: count)
        threads.start()
        return BlockingPool(threads: threads)
    }

    /// Lets the threads go once the work queued on them is done, without waiting for it.
    package func stop() {
        threads.shutdownGracefully { _ in }
    }

    /// Runs `work` on one of the pool's threads and waits for it without holding a thread of
    /// the cooperative pool. Cancellation has one form: a task cancelled before its work starts
    /// never runs it, and once it runs, `checkCancellation` throws `CancellationError`.
    package func run<Result: Sendable>(
        _ work: @escaping @Sendable (_ checkCancellation: () throws -> Void) throws -> Result
    ) async throws -> Result {
        let cancelled = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await threads.runIfActive {
                try work { if cancelled.isSet.load(ordering: .relaxed) { throw CancellationError() } }
            }
        } onCancel: {
            cancelled.isSet.store(true, ordering: .relaxed)
        }
    }
}

private final class CancellationFlag: Sendable {
    let isSet = Atomic(false)
}
