import Dispatch
import Foundation
import KeyferryThreads
import Synchronization
import Testing

@Suite("Blocking work")
struct BlockingWorkTests {
    /// An actor whose calls block, on an executor of its own.
    actor Blocker {
        private nonisolated let executor = BlockingSerialExecutor(label: "keyferry.test.blocker")
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        /// Blocks until released; false if nobody released it in two minutes. That bound is for
        /// the failure this test looks for, a pool so blocked that nobody ever will: on a loaded
        /// machine, with other suites' work on the pool, a release may take seconds.
        func wait(_ started: Counter, _ release: DispatchSemaphore) -> Bool {
            started.value.add(1, ordering: .relaxed)
            return release.wait(timeout: .now() + 120) == .success
        }
    }

    final class Counter: Sendable {
        let value = Atomic(0)
    }

    @Test("actors on blocking executors, twice as many as cores and all blocked, leave the cooperative pool free to release them")
    func poolStaysFree() async {
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount
        let started = Counter()
        let release = DispatchSemaphore(value: 0)
        let blockers = (0..<count).map { _ in Blocker() }
        // On the pool: it can run only while the blocked calls leave it a thread. Were they on
        // the pool, its threads would all be blocked, and every wait would time out.
        let releaser = Task {
            while started.value.load(ordering: .relaxed) < count { try? await Task.sleep(for: .milliseconds(5)) }
            for _ in 0..<count { release.signal() }
        }
        let released = await withTaskGroup(of: Bool.self) { group in
            for blocker in blockers { group.addTask { await blocker.wait(started, release) } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        await releaser.value
        #expect(released == Array(repeating: true, count: count))
    }
}
