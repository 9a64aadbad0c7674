import Dispatch
import Foundation

/// One piece of work started at once on a thread of its own, whose result (or error) the
/// starter collects later: enough to overlap reading the next batch with handling this one.
package final class BackgroundWork<Result: Sendable>: Sendable {
    private let outcome = Locked<Swift.Result<Result, any Error>?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    package init(_ work: @escaping @Sendable () throws -> Result) {
        // Not a dispatch worker: work that fans out over every core (ParallelMap) would find
        // one of the pool's threads taken by itself.
        Thread { [self] in
            let result = Swift.Result { try work() }
            outcome.withLock { $0 = result }
            finished.signal()
        }.start()
    }

    /// Waits for the work to finish; once it has, every call returns its outcome at once.
    package func result() throws -> Result {
        finished.wait()
        finished.signal()
        return try outcome.withLock { $0! }.get()
    }
}
