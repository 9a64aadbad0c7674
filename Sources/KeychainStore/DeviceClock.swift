public import Foundation
import KeychainModel
import KeyferryThreads

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
    private let current: Locked<Date>

    public init(_ start: Date = Date(timeIntervalSinceReferenceDate: 800_000_000)) {
        current = Locked(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}

/// Another clock plus an offset that only grows: a node's clock, moved forward by
/// `keyferry device clock --advance` so grace periods and 30-day windows pass without waiting.
/// It never goes back, as time on a device does not.
public final class AdvancingClock: DeviceClock {
    /// The clock it follows, which `advance` does not move.
    public let base: any DeviceClock
    private let offset = Locked<TimeInterval>(0)

    public init(_ base: any DeviceClock = SystemClock()) {
        self.base = base
    }

    public func now() -> Date { base.now() + advanced }

    /// How far this clock is ahead of the one it follows.
    public var advanced: TimeInterval { offset.withLock { $0 } }

    public func advance(by seconds: TimeInterval) {
        precondition(seconds >= 0 && seconds.isFinite, "a clock only moves forward")
        offset.withLock { $0 += seconds }
    }

    /// Seconds in a span written as people write it: `90s`, `10m`, `1h30m`, `30d`, `2w`
    /// (a bare number is seconds); anything else, or a span past a century, is refused.
    public static func seconds(in text: String) throws -> TimeInterval {
        guard let seconds = parse(text) else {
            throw DeviceError(.invalidArgument, "'\(text)' is not a span of time; write it as 90s, 10m, 1h30m, 30d or 2w.")
        }
        return seconds
    }

    private static func parse(_ text: String) -> TimeInterval? {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        if let plain = TimeInterval(text), plain >= 0, plain.isFinite, plain < 3.2e9 { return plain }
        var total: TimeInterval = 0
        var number = ""
        for character in text {
            if character.isASCII, character.isNumber || character == "." {
                number.append(character)
            } else if let unit = units[character], let value = TimeInterval(number) {
                total += value * unit
                number = ""
            } else {
                return nil
            }
        }
        guard number.isEmpty, !text.isEmpty, total.isFinite, total < 3.2e9 else { return nil }
        return total
    }
}
