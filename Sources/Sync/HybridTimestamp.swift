/// A hybrid logical clock reading: wall-clock milliseconds, and a counter that orders writes
/// within one millisecond or while this node's wall clock is behind a time it has already
/// seen. Every node orders versions by it alike, so a write made after seeing another is
/// always the newer one, whatever the clocks of the two nodes say.
public struct HybridTimestamp: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var milliseconds: UInt64
    public var counter: UInt32

    public init(milliseconds: UInt64, counter: UInt32 = 0) {
        self.milliseconds = milliseconds
        self.counter = counter
    }

    public static let zero = HybridTimestamp(milliseconds: 0)

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.milliseconds, lhs.counter) < (rhs.milliseconds, rhs.counter)
    }

    public var description: String { "\(milliseconds).\(counter)" }
}

/// Issues timestamps for local writes; the wall clock is passed in, so tests can skew it.
public struct HybridClock: Sendable {
    /// The latest timestamp issued or observed.
    public private(set) var latest: HybridTimestamp

    public init(latest: HybridTimestamp = .zero) { self.latest = latest }

    /// A timestamp for a local write: later than every timestamp issued or observed so far,
    /// and equal to the wall clock when that is ahead of them.
    public mutating func tick(wallMilliseconds: UInt64) -> HybridTimestamp {
        if wallMilliseconds > latest.milliseconds {
            latest = HybridTimestamp(milliseconds: wallMilliseconds)
        } else if latest.counter == .max {
            latest = HybridTimestamp(milliseconds: latest.milliseconds + 1)
        } else {
            latest.counter += 1
        }
        return latest
    }

    /// Takes in a timestamp written elsewhere, so that the next local write comes after it.
    public mutating func observe(_ remote: HybridTimestamp) {
        if remote > latest { latest = remote }
    }
}
