/// Waits, without blocking a thread, until `condition` holds (checking every 5 ms); false once
/// `limit` has passed, a bound only something stuck reaches on a loaded machine.
public func eventually(within limit: Duration = .seconds(120), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}
