import KeyferryThreads

/// The device's async face. Its API is synchronous, as Keychain Services are (a call blocks its
/// caller as `securityd` does); an async caller (the node's routes, the survival matrix) goes
/// through these two doors instead of choosing a thread, as GRDB's `DatabaseWriter.write` does
/// for its database.
extension Device {
    /// How many long jobs run at once; more wait their turn.
    static let concurrentLongJobs = 2

    /// One call of the device's API, on the process's pool for blocking calls, never on the
    /// cooperative pool: a passcode hashed there would hold up every task of the process. A
    /// call whose task is cancelled before it starts never runs.
    package func run<Result: Sendable>(_ call: @escaping @Sendable (Device) throws -> Result) async throws -> Result {
        try await BlockingPool.shared.run { _ in try call(self) }
    }

    /// A long job on the device (a backup, a transfer, a survival matrix's path), on the
    /// device's own few threads, so that its calls meanwhile still find one; at most
    /// `concurrentLongJobs` run at once. `checkCancellation` throws `CancellationError` once the
    /// waiting task is cancelled: a job calls it between steps, and stops there.
    package func longJob<Result: Sendable>(
        _ job: @escaping @Sendable (Device, _ checkCancellation: () throws -> Void) throws -> Result
    ) async throws -> Result {
        let pool = longJobs.withLock { pool in
            if let pool { return pool }
            let started = BlockingPool.started(threads: Self.concurrentLongJobs)
            pool = started
            return started
        }
        return try await pool.run { checkCancellation in try job(self, checkCancellation) }
    }

    /// At power-off: the long jobs' threads go once their work is done.
    func stopLongJobs() {
        longJobs.withLock { pool in
            pool?.stop()
            pool = nil
        }
    }
}
