import Foundation
package import KeychainModel
package import KeychainStore
import KeyferryThreads
package import NodeControl
package import Survival
import Sync
import SyncWire

/// What the command line can learn of a device whose node is not running: read in this
/// process, from the device at rest, holding it meanwhile.
extension NodeClient {
    /// The device's status: from its node when it runs, otherwise read from the powered-off
    /// device on disk.
    package func deviceStatus() async throws -> DeviceStatus {
        do {
            return try await status().device
        } catch let error as NodeError where error.code == .notRunning {
            return try Device.status(at: paths.directory)
        }
    }

    /// The device's circle: from its node when it runs, otherwise as the powered-off device
    /// last read it (`MemberAtRest`).
    package func circleStatus() async throws -> NodeAPI.CircleStatus {
        do {
            return try await get(.circleStatus)
        } catch let error as NodeError where error.code == .notRunning {
            try DeviceLayout(root: paths.directory).requireDevice()
            guard let member = try MemberAtRest.read(from: paths.directory) else { return NodeAPI.CircleStatus(members: [], poweredOff: true) }
            return Self.circleStatus(member)
        }
    }

    /// The device's sync: from its node when it runs, otherwise what the powered-off device
    /// remembers (no exchange, nothing pending counted).
    package func syncStatus() async throws -> NodeAPI.SyncStatus {
        do {
            return try await get(.syncStatus)
        } catch let error as NodeError where error.code == .notRunning {
            try DeviceLayout(root: paths.directory).requireDevice()
            guard let member = try MemberAtRest.read(from: paths.directory) else {
                return NodeAPI.SyncStatus(members: [], pending: 0, waitingForUnlock: 0, skippedDeviceBound: [], received: [], poweredOff: true)
            }
            let circle = Self.circleStatus(member)
            return NodeAPI.SyncStatus(
                circle: member.circle, members: circle.members, lastChange: member.lastChange, pending: 0, waitingForUnlock: 0,
                skippedDeviceBound: [], received: NodeSync.received(member.received, members: circle.members), poweredOff: true)
        }
    }

    private static func circleStatus(_ member: MemberAtRest) -> NodeAPI.CircleStatus {
        NodeAPI.CircleStatus(
            circle: member.circle, removed: member.isMember ? nil : true, relay: member.relay.absoluteString, name: member.name,
            epoch: member.epoch, members: member.members.map { peer in NodeSync.peer(peer, isThisDevice: member.me.map { peer.signing == $0 }) },
            poweredOff: true)
    }

    /// The survival matrix: from the node when it runs; otherwise of a copy of the powered-off
    /// device (`offline`).
    package func survival(app: String?, passcode: String?) async throws -> SurvivalMatrix {
        do {
            return try await call(.survival, NodeAPI.SurvivalOptions(app: app, passcode: passcode))
        } catch let error as NodeError where error.code == .notRunning {
            return try await offline(passcode: passcode) { device, scratch in
                try await Survival.matrix(of: device, options: .init(app: app, passcode: passcode, scratch: scratch))
            }
        }
    }

    /// The survival matrix beside the Simulator's, as `survival` runs it.
    package func survivalAgainstSimulator(app: String?, passcode: String?) async throws -> SurvivalComparison {
        do {
            return try await call(.survivalAgainstSimulator, NodeAPI.SurvivalOptions(app: app, passcode: passcode))
        } catch let error as NodeError where error.code == .notRunning {
            return try await offline(passcode: passcode) { device, scratch in
                try await Survival.compareWithSimulator(device, options: .init(app: app, passcode: passcode, scratch: scratch))
            }
        }
    }

    /// Runs `work` on the powered-off device itself (held meanwhile, so no node starts),
    /// powered on in this process and unlocked with `passcode`, which counts as any unlock
    /// does: a backup, which the device remembers making. A long job of the device's;
    /// `work`'s `checkCancellation` stops it at its next step.
    package func atRest<Answer: Sendable>(
        passcode: String?, _ work: @escaping @Sendable (Device, _ checkCancellation: () throws -> Void) throws -> Answer
    ) async throws -> Answer {
        let directory = paths.directory
        let (hold, device) = try await BlockingPool.shared.run { _ in
            let hold = try DeviceHold.take(directory)
            do {
                let device = try Device.powerOn(holding: hold)
                do {
                    if try device.passcodeIsSet() {
                        guard let passcode else { throw Self.passcodeNeeded(directory, flag: "--passcode-file F") }
                        try device.unlock(passcode: passcode)
                    }
                    return (hold, device)
                } catch {
                    device.powerOff()
                    throw error
                }
            } catch {
                hold.release()
                throw error
            }
        }
        defer {
            device.powerOff()
            hold.release()
        }
        return try await device.longJob(work)
    }

    /// Runs `work` on a copy of the powered-off device (held meanwhile, so no node starts), made
    /// inside its directory, powered on in this process and unlocked with `passcode`, with the
    /// directory its scratch devices go in. A passcode that does not unlock the copy is checked
    /// on the device itself, where it counts and waits as any unlock does; the right one leaves
    /// the device byte for byte as it was.
    private func offline<Answer>(passcode: String?, _ work: (Device, URL) async throws -> Answer) async throws -> Answer {
        let directory = paths.directory
        let scratch = Survival.scratch(of: directory)
        let (hold, device) = try await BlockingPool.shared.run { _ in
            let hold = try DeviceHold.take(directory)
            do {
                return (hold, try Self.copyAtRest(hold, into: scratch, passcode: passcode))
            } catch {
                Survival.removeScratch(of: directory)
                hold.release()
                throw error
            }
        }
        defer {
            device.powerOff()
            Survival.removeScratch(of: directory)
            hold.release()
        }
        return try await work(device, scratch)
    }

    /// The copy `offline` works on, powered on and unlocked.
    private static func copyAtRest(_ hold: DeviceHold, into scratch: URL, passcode: String?) throws -> Device {
        Survival.removeScratch(of: hold.directory)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let copy = scratch.appendingPathComponent("at-rest")
        try Device.copyAtRest(hold, to: copy)
        let device = try Device.powerOn(at: copy)
        do {
            if try device.passcodeIsSet() {
                guard let passcode else { throw Self.passcodeNeeded(hold.directory, flag: "--passcode") }
                let earlierFailures = try device.status().failedPasscodeAttempts
                do {
                    try device.unlock(passcode: passcode)
                } catch let refusal as KeychainError where refusal.status == .authFailed {
                    try Self.check(passcode, on: hold)
                    throw refusal
                }
                // The right passcode after wrong ones clears the device's count, as it would there.
                if earlierFailures > 0 { try Self.check(passcode, on: hold) }
            }
            return device
        } catch {
            device.powerOff()
            throw error
        }
    }

    /// Why a powered-off device with a passcode cannot be opened without it, naming the
    /// command's `flag` for it.
    private static func passcodeNeeded(_ directory: URL, flag: String) -> KeychainError {
        KeychainError(
            .authFailed,
            "\(directory.path) is powered off and has a passcode, so its secrets are locked; give it with \(flag), or start and unlock its node.")
    }

    /// Checks `passcode` on the powered-off device itself, which the caller holds: counted, and
    /// refused while it waits.
    private static func check(_ passcode: String, on hold: DeviceHold) throws {
        let device = try Device.powerOn(holding: hold)
        defer { device.powerOff() }
        try device.checkPasscode(passcode)
    }
}
