import Dispatch
import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Synchronization
import Testing

/// The device's two doors for async callers (`Device.run`, `Device.longJob`): the contract a
/// node relies on to answer while it writes a backup, and to drop one whose caller left.
@Suite("the device's calls and long jobs")
struct DeviceWorkTests {
    final class Counter: Sendable {
        let value = Atomic(0)
        var count: Int { value.load(ordering: .relaxed) }
        func add() { value.add(1, ordering: .relaxed) }
    }

    @Test("with as many long jobs as the device runs at once blocked, its calls are answered and a further job waits its turn")
    func callsAreAnsweredDuringLongJobs() async throws {
        let fixture = try TestDevice()
        let device = fixture.device
        let started = Counter()
        let release = DispatchSemaphore(value: 0)
        let blocked = (0..<2).map { _ in
            Task {
                try await device.longJob { _, _ in
                    started.add()
                    return release.wait(timeout: .now() + 120) == .success
                }
            }
        }
        #expect(await eventually { started.count == 2 }, "both long jobs started")
        let third = Task { try await device.longJob { _, _ in started.add() } }

        // The calls' pool is not the long jobs': the device answers meanwhile.
        let status = try await device.run { try $0.status() }
        #expect(status.lockState == .unlocked)
        #expect(try await device.run { try $0.keychain(for: TestDevice.appID).list().items.count } == 0)
        #expect(started.count == 2, "the third job waits while two run")

        for _ in blocked { release.signal() }
        for job in blocked { #expect(try await job.value, "released, not timed out") }
        try await third.value
        #expect(started.count == 3)
    }

    @Test("calls that block, twice as many as cores, leave the cooperative pool free to release them")
    func callsLeaveTheCooperativePoolFree() async throws {
        let fixture = try TestDevice()
        let device = fixture.device
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount
        let started = Counter()
        let release = DispatchSemaphore(value: 0)
        // On the cooperative pool: it runs only while the blocked calls leave it a thread. Were
        // they on that pool, its threads would all be blocked, and every wait would time out.
        let releaser = Task {
            var released = 0
            while released < count {
                if started.count > released {
                    release.signal()
                    released += 1
                } else {
                    try? await Task.sleep(for: .milliseconds(5))
                }
            }
        }
        let answered = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    try await device.run { device in
                        started.add()
                        return release.wait(timeout: .now() + 120) == .success && device.isProtectedDataAvailable
                    }
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        await releaser.value
        #expect(answered == Array(repeating: true, count: count))
    }

    @Test("a long job whose task is cancelled stops at its next check; one cancelled before it starts never runs")
    func cancellation() async throws {
        let fixture = try TestDevice()
        let device = fixture.device
        let started = Counter()
        let checking = Task {
            try await device.longJob { _, checkCancellation in
                started.add()
                // Bounded, so that a check that never throws fails the test instead of hanging it.
                for _ in 0..<120_000 {
                    try checkCancellation()
                    usleep(1_000)
                }
            }
        }
        let release = DispatchSemaphore(value: 0)
        let blocking = Task {
            try await device.longJob { _, _ in
                started.add()
                _ = release.wait(timeout: .now() + 120)
            }
        }
        #expect(await eventually { started.count == 2 })
        let ran = Counter()
        let queued = Task { try await device.longJob { _, _ in ran.add() } }
        queued.cancel()
        checking.cancel()
        await #expect(throws: CancellationError.self) { try await checking.value }
        release.signal()
        try await blocking.value
        await #expect(throws: CancellationError.self) { try await queued.value }
        #expect(ran.count == 0, "cancelled while it waited: never run")
    }

    @Test("power-off lets the long jobs' threads go; a device powered on again runs jobs anew")
    func powerOffStopsTheJobs() async throws {
        let fixture = try TestDevice()
        #expect(try await fixture.device.longJob { device, _ in try device.status().lockState } == .unlocked)
        fixture.device.powerOff()
        let again = try Device.powerOn(at: fixture.directory, clock: fixture.clock)
        defer { again.powerOff() }
        #expect(try await again.longJob { device, _ in try device.passcodeIsSet() })
    }
}
