import KeyferryThreads

/// A value the tasks of a test share: a reference to a `Locked` (which cannot be copied), so an
/// escaping closure can capture it. For counting what a test waits on, instead of sleeping.
public final class Shared<Value: Sendable>: Sendable {
    private let value: Locked<Value>

    public init(_ value: Value) { self.value = Locked(value) }

    public func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        value.withLock { body(&$0) }
    }
}
