package import Synchronization

/// A value behind a lock, safe to use from async code in an optimized build: the lock
/// every module of Keyferry uses, in place of `Synchronization.Mutex`.
///
/// On Linux, `Mutex` records its owner's thread ID in its lock word and reads that ID from a
/// C thread-local that `withLock` inlines into its caller. In an optimized async function the
/// compiler may take that thread-local's address before an executor hop and use it after, on
/// another thread: the lock is then taken in the first thread's name and released in the
/// second's, and the process stops ("Call to unlock Mutex on a thread which hasn't acquired the
/// lock"). Behind a call that is never inlined, the address is taken on the thread that locks.
/// `LockedTests` holds a reproduction of the miscompile and this fix.
package struct Locked<Value: ~Copyable>: ~Copyable, Sendable {
    @usableFromInline let mutex: Mutex<Value>

    package init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with the value, holding the lock. Never inlined into the caller: that is
    /// the point (see the type's comment).
    @inlinable @inline(never)
    package borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock(body)
    }
}
