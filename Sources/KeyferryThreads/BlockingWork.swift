import Foundation
import Synchronization

/// Runs long, blocking `work` (a backup, a path of the survival matrix) on a thread of its own
/// and waits for it without holding a thread of the cooperative pool: a node must go on
/// hearing other requests, and its caller leaving, meanwhile. `work` gets a check that throws `CancellationError` once the
/// waiting task is cancelled.
package func onThreadOfItsOwn<Result: Sendable>(
    _ work: @escaping @Sendable (_ checkCancellation: () throws -> Void) throws -> Result
) async throws -> Result {
    let cancelled = CancellationFlag()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Swift.Result {
                        try work { if cancelled.isSet.load(ordering: .relaxed) { throw CancellationError() } }
                    })
            }.start()
        }
    } onCancel: {
        cancelled.isSet.store(true, ordering: .relaxed)
    }
}

private final class CancellationFlag: Sendable {
    let isSet = Atomic(false)
}

/// A serial executor on a dispatch queue of its own, for actors whose methods block (SQLite,
/// password hashing, sealing): their jobs run beside the cooperative pool, never on it. The
/// pool has a thread per core, so one slow call there holds up every task of the process
/// (a node's socket, a relay's connections) until it returns.
package final class BlockingSerialExecutor: SerialExecutor {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
