/// A hybrid logical clock reading: wall-clock milliseconds, and a counter that orders writes
/// within one millisecond or while this node's wall clock is behind a time it has already
/// seen. Every node orders versions by it alike, so a write made after seeing another is
/// always the newer one, whatever the clocks of the two nodes say.
package struct HybridTimestamp: Comparable, Hashable, Sendable, CustomStringConvertible {
    package var milliseconds: UInt64
    package var counter: UInt32

    package init(milliseconds: UInt64, counter: UInt32 = 0) {
        self.milliseconds = milliseconds
        self.counter = counter
    }

    package static let zero = HybridTimestamp(milliseconds: 0)

    package static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.milliseconds, lhs.counter) < (rhs.milliseconds, rhs.counter)
    }

    /// The next reading after this one; the last possible reading stays where it is.
    package var successor: HybridTimestamp {
        if counter < .max { return HybridTimestamp(milliseconds: milliseconds, counter: counter + 1) }
        return milliseconds < .max ? HybridTimestamp(milliseconds: milliseconds + 1) : self
    }

    package var description: String { "\(milliseconds).\(counter)" }
}

/// A member's hybrid clock, read at the time of each change rather than at its upload.
///
/// It remembers what it read as the device's change feed advanced: once the feed had reached
/// sequence `s`, the clock read `time`. A local change made at sequence `c` is stamped after
/// every version issued or observed before `c`, and with the time of the change when that is
/// later. So an edit made before a lock and uploaded after unlock keeps its own time, and loses
/// to a later edit made elsewhere meanwhile; and a write made after seeing another still wins,
/// whatever the two wall clocks say.
package struct HybridClock: Sendable, Equatable {
    /// `sync.json` keeps these as they are.
    package struct Reading: Sendable, Equatable, Codable {
        package var sequence: Int64
        package var time: HybridTimestamp

        package init(sequence: Int64, time: HybridTimestamp) {
            self.sequence = sequence
            self.time = time
        }
    }

    /// In change-sequence order, each time later than the ones before it.
    package private(set) var readings: [Reading]

    package init(readings: [Reading] = []) {
        self.readings = []
        for reading in readings { record(reading.time, at: reading.sequence) }
    }

    /// The latest time issued or observed.
    package var latest: HybridTimestamp { readings.last?.time ?? .zero }

    /// What the clock read just before the change at `sequence` was made.
    package func reading(before sequence: Int64) -> HybridTimestamp {
        readings.last { $0.sequence < sequence }?.time ?? .zero
    }

    /// The version of a local change: the change at `sequence`, made at `wallMilliseconds`.
    package mutating func stamp(changeAt sequence: Int64, wallMilliseconds: UInt64) -> HybridTimestamp {
        let before = reading(before: sequence)
        let stamp = wallMilliseconds > before.milliseconds ? HybridTimestamp(milliseconds: wallMilliseconds) : before.successor
        record(stamp, at: sequence)
        return stamp
    }

    /// Takes in a version written elsewhere, seen once the feed had reached `sequence`: every
    /// local change made after that comes after it.
    package mutating func observe(_ remote: HybridTimestamp, at sequence: Int64) {
        record(remote, at: sequence)
    }

    /// Folds the readings up to `sequence` into one: every change still to stamp was made after it.
    package mutating func forget(through sequence: Int64) {
        guard let last = readings.lastIndex(where: { $0.sequence <= sequence }), last > 0 else { return }
        readings.removeFirst(last)
    }

    /// Keeps the readings increasing in both sequence and time: a reading that adds nothing to
    /// what an earlier one says is dropped, and later ones it overtakes give way.
    private mutating func record(_ time: HybridTimestamp, at sequence: Int64) {
        guard reading(before: sequence + 1) < time else { return }
        // The usual case, a change later in the feed than every reading: one more at the end.
        if readings.last.map({ $0.sequence < sequence }) ?? true {
            return readings.append(Reading(sequence: sequence, time: time))
        }
        readings.removeAll { $0.sequence >= sequence && $0.time <= time }
        let index = readings.firstIndex { $0.sequence > sequence } ?? readings.endIndex
        readings.insert(Reading(sequence: sequence, time: time), at: index)
    }
}

/// `[milliseconds, counter]`, as `sync.json` keeps it.
extension HybridTimestamp: Codable {
    package init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        self.init(milliseconds: try container.decode(UInt64.self), counter: try container.decode(UInt32.self))
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(milliseconds)
        try container.encode(counter)
    }
}
