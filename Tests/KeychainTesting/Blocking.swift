import Dispatch
public import Testing

/// For a suite whose tests block their thread: waiting for the processes they start, reading
/// their pipes, sleeping. Its tests run on threads beside the cooperative pool, which has one
/// thread per core: two such tests on it would stop every other suite's async work (a relay's
/// answers, a timer) for as long as they wait, and on a loaded machine a wait can be long.
public struct Blocking: SuiteTrait, TestTrait, TestScoping {
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(BlockingTaskExecutor.shared) { try await function() }
    }
}

extension Trait where Self == Blocking {
    /// The tests block their thread; they run beside the cooperative pool (see `Blocking`).
    public static var blocking: Blocking { Blocking() }
}

/// Runs each job on a dispatch queue whose pool grows a thread whenever one blocks, unlike the
/// cooperative pool's fixed one per core.
final class BlockingTaskExecutor: TaskExecutor {
    static let shared = BlockingTaskExecutor()
    private let queue = DispatchQueue(label: "keyferry.tests.blocking", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
