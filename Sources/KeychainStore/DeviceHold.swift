public import Foundation
import KeychainModel
import KeyferrySystem
import KeyferryThreads

/// The claim on a device's directory that whoever touches the device takes: powering it on (a
/// node, a test, a command reading it offline), restoring onto it, copying it at rest. It is the
/// directory's lock file (`DeviceLayout.lock`), held until released; the kernel drops it when
/// its process dies, SIGKILL included. One holder at a time, in any process: so no caller has to
/// remember to take a lock before touching a device, and none can forget.
public final class DeviceHold: Sendable {
    public let directory: URL
    private let lock: Locked<ProcessLock?>

    private init(directory: URL, lock: ProcessLock) {
        self.directory = directory
        self.lock = Locked(lock)
    }

    /// Takes the device in `directory`, or fails with `inUse` when another holder has it. The
    /// taker puts right what a cut restore left: it finishes or undoes the swap, and removes a
    /// replacement a killed restore left half-built.
    public static func take(_ directory: URL) throws -> DeviceHold {
        Device.recoverReplacement(at: directory)
        let layout = DeviceLayout(root: directory)
        try layout.requireDevice()
        var acquired: ProcessLock?
        // A child this process is spawning shares its open files until it execs, the lock's
        // included: a hold just let go can outlive its release by that moment, so a refusal is
        // retried briefly before it counts. A real holder keeps it far longer.
        for attempt in 0..<20 where acquired == nil {
            if attempt > 0 { usleep(5_000) }
            do {
                acquired = try ProcessLock.acquire(layout.lock)
            } catch {
                throw DeviceError(.io, "cannot take \(directory.path): \(error).", subject: directory.path)
            }
        }
        guard let acquired else { throw DeviceError.inUse(directory) }
        Device.removeAbandonedStaging(for: directory)
        return DeviceHold(directory: directory, lock: acquired)
    }

    /// Lets the device go; only the first call does anything.
    public func release() {
        lock.withLock { lock in
            lock?.release()
            lock = nil
        }
    }

    deinit { release() }
}
