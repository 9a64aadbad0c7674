import Foundation
public import KeyferrySecurity
import KeyferryThreads

/// What became of one launch of an app's code.
public enum LaunchOutcome<Value: Sendable>: Sendable {
    /// The code returned.
    case finished(Value)
    /// The app was killed after this many Keychain Services calls, as the system kills an app
    /// in the background: nothing after them ran.
    case killed(afterCalls: Int)
}

extension KeyferryContext {
    /// Runs `body` as one launch of the app, on a thread of its own. With `killAfterCalls`, the
    /// app is killed once that many Keychain Services calls have returned: the next call never
    /// returns and no more of the code runs, on that thread or in the actors it uses (they run
    /// on the launch's thread too). Then launch the app again and see what it finds: the
    /// read-write-verify-delete migrations of the seeds are tested this way.
    ///
    /// As after a real kill, what the killed launch made is gone with it: make the app's
    /// objects inside `body`, as a relaunch does. An actor the killed code was running in
    /// stays busy for good, so a call into it from outside would never return.
    ///
    /// While a launch runs, it owns this context's calls: use one launch at a time per app.
    /// Code that hops to the main actor or another custom executor is not stopped there; its
    /// calls fail with `errSecNotAvailable` instead.
    public func launch<Value: Sendable>(
        killAfterCalls limit: Int? = nil, _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> LaunchOutcome<Value> {
        let thread = LaunchThread()
        let outcome = Once<Result<LaunchOutcome<Value>, any Error>>()
        let calls = Locked(0)
        beforeEachCall { _ in
            let made = calls.withLock { count in
                defer { count += 1 }
                return count
            }
            guard let limit, made >= limit else { return nil }
            outcome.resolve(.success(.killed(afterCalls: limit)))
            thread.kill()
            // A call from another thread (the main actor) cannot be stopped with the app: it
            // and every later one fail instead.
            return errSecNotAvailable
        }
        defer { beforeEachCall(nil) }
        return try await withCheckedThrowingContinuation { continuation in
            outcome.whenResolved { continuation.resume(with: $0) }
            Task(executorPreference: thread) {
                do {
                    let value = try await self.run(body)
                    outcome.resolve(.success(.finished(value)))
                } catch {
                    outcome.resolve(.failure(error))
                }
                thread.finish()
            }
        }
    }
}

/// The thread a launch's code runs on, as a task executor: killing the app ends the thread
/// from inside the call that was about to happen, so none of the launch's code runs again.
final class LaunchThread: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false
    private var thread: Thread?

    init() {
        let thread = Thread { [unowned self] in self.serve() }
        thread.name = "keyferry app launch"
        self.thread = thread
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    private func serve() {
        while let job = next() {
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    private func next() -> UnownedJob? {
        condition.withLock {
            while jobs.isEmpty && !finished { condition.wait() }
            return jobs.isEmpty ? nil : jobs.removeFirst()
        }
    }

    /// Ends the thread once the jobs queued so far have run.
    func finish() {
        condition.withLock {
            finished = true
            condition.signal()
        }
    }

    /// Ends the thread now when called on it, from the call the kill interrupts: the rest of
    /// that job and every job after it never run, so the launch's code stops where it stood.
    /// The jobs left behind are dropped with the executor.
    func kill() {
        guard Thread.current == thread else { return }
        finish()
        Thread.exit()
    }
}

/// A value set once, and the one waiter told of it.
final class Once<Value: Sendable>: Sendable {
    private let state = Locked<(value: Value?, waiter: (@Sendable (Value) -> Void)?)>((nil, nil))

    func resolve(_ value: Value) {
        let waiter: (@Sendable (Value) -> Void)? = state.withLock { state in
            guard state.value == nil else { return nil }
            state.value = value
            return state.waiter
        }
        waiter?(value)
    }

    func whenResolved(_ waiter: @escaping @Sendable (Value) -> Void) {
        let value: Value? = state.withLock { state in
            if state.value == nil { state.waiter = waiter }
            return state.value
        }
        if let value { waiter(value) }
    }
}
