// The smallest program that shows why Keyferry locks with `Locked` rather than `Mutex`.
// LockedTests compiles it optimized (swiftc -O), once with Synchronization's Mutex and once
// with -DLOCKED and Sources/KeyferryThreads/Locked.swift, and runs both.
//
// The shape is NodeSync.exchange's: an awaited call to an actor that throws, then a lock on
// both the success and the error path. The compiler takes the address of the thread-local
// that holds Mutex's owner ID right after the call returns, on the actor's thread, and uses
// it after the hop back to the pool, on another thread.
import Dispatch
package import Synchronization

/// An actor whose jobs run on a dispatch queue of their own: any hop between executors shows it.
actor Engine {
    private nonisolated let executor = QueueExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    @inline(never)
    func work(_ box: Box, fail: Bool) async throws -> Int {
        await Task.yield()
        if fail { throw Failure() }
        return box.touch()
    }
}

final class QueueExecutor: SerialExecutor {
    private let queue = DispatchQueue(label: "engine")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

final class Box: Sendable {
    #if LOCKED
        let state = Locked(0)
    #else
        let state = Mutex(0)
    #endif

    func touch() -> Int {
        state.withLock { value in
            value += 1
            return value
        }
    }

    func exchange(_ engine: Engine, fail: Bool) async -> Int {
        do {
            let seen = try await engine.work(self, fail: fail)
            state.withLock { $0 += 1 }
            return seen
        } catch {
            state.withLock { $0 -= 1 }
            return 0
        }
    }
}

struct Failure: Error {}

@main
enum LockAfterHop {
    static func main() async {
        let box = Box()
        let engine = Engine()
        for _ in 0..<1000 { _ = await box.exchange(engine, fail: false) }
        print("ok", box.state.withLock { $0 })
    }
}
