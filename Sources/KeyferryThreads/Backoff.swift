/// How long to wait before trying again what failed: doubling from `initial` up to `maximum`,
/// each wait drawn between half and all of the current step, so that members that failed
/// together do not all try again at the same instant. One rule for every retry loop.
package struct Backoff: Sendable {
    package let initial: Duration
    package let maximum: Duration
    private var step: Duration

    package init(initial: Duration, maximum: Duration) {
        self.initial = initial
        self.maximum = maximum
        step = initial
    }

    /// The wait before the next attempt; the one after is twice as long, up to `maximum`.
    package mutating func next() -> Duration {
        let wait = step * Double.random(in: 0.5...1)
        step = min(step * 2, maximum)
        return wait
    }

    /// After a success: the next failure waits `initial` again.
    package mutating func reset() {
        step = initial
    }
}
