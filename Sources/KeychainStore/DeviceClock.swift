import Foundation
import Synchronization

/// The device's notion of now. Injected so grace periods and modification dates are testable.
public protocol DeviceClock: Sendable {
    func now() -> Date
}

public struct SystemClock: DeviceClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that moves only when told to: for tests and scripted scenarios.
public final class ManualClock: DeviceClock {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSinceReferenceDate: 800_000_000)) {
        current = Mutex(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}
