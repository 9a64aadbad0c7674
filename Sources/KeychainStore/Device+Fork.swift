public import Foundation
import GRDB
import KeychainModel
import KeyferryCrypto

extension Device {
    /// A copy of this powered-on device in `directory` (which must not exist) as it is now: its
    /// store, apps, sandboxes and group containers, its lock state with the class keys in memory, and its
    /// hardware UID. So it *is* this device, for trying what a path would do to it without
    /// touching it. The sync state stays behind: the copy is in no circle. Its clock starts at
    /// this device's now and moves on its own (`advanceClock`).
    package func fork(to directory: URL) throws -> Device {
        let files = FileManager.default
        let fork = DeviceLayout(root: directory)
        do {
            try files.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try files.copyItem(at: layout.hardwareUID, to: fork.hardwareUID)
            try files.copyItem(at: layout.info, to: fork.info)
            try files.copyItem(at: layout.apps, to: fork.apps)
            if files.fileExists(atPath: layout.groups.path) { try files.copyItem(at: layout.groups, to: fork.groups) }
            // SQLite's online backup: one consistent snapshot, while this device stays in use.
            let copy = try DatabaseQueue(path: fork.database.path)
            try database.queue.backup(to: copy)
            // The versions sync holds are sync state too.
            try copy.write(ReplicaTable.removeAll)
            try copy.close()
        } catch {
            try? files.removeItem(at: directory)
            throw DeviceError(.io, "could not copy \(info.name) to \(directory.path): \(Self.describe(error)).")
        }
        let machine = try withPower { $0 }
        let uid = try SymmetricKey(bytes: try Data(contentsOf: fork.hardwareUID))
        let database = try KeychainDatabase(path: fork.database.path)
        return Device(layout: fork, info: info, uid: uid, database: database, clock: AdvancingClock(clock), entropy: entropy, machine: machine)
    }

    /// A fork as `fork(to:)`, unlocked with `passcode` whatever this device's lock state: the
    /// passcode is checked here, on this device (a wrong one counts, as every check does), and
    /// the class keys that check opens unlock the fork. This device stays as locked as it was.
    package func fork(to directory: URL, unlockingWith passcode: String) throws -> Device {
        let keys = try verifyPasscode(passcode)
        let fork = try fork(to: directory)
        do {
            try fork.unlock(with: keys)
        } catch {
            fork.powerOff()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        return fork
    }

    /// The same secrets on the iOS Simulator: a fork, unlocked (with `passcode` when this device
    /// is locked), whose passcode is gone but whose items all stay, `whenPasscodeSetThisDeviceOnly`
    /// ones too, every class key wrapped by the UID alone, and which behaves as `simulator`
    /// (`survival --compare simulator`). Powered on and unlocked, as a Simulator always is.
    package func simulatorTwin(at directory: URL, unlockingWith passcode: String?) throws -> Device {
        let twin = try passcode.map { try fork(to: directory, unlockingWith: $0) } ?? fork(to: directory)
        do {
            let keys = try twin.withPower { machine -> [ProtectionClass: ClassKeys] in
                guard machine.state == .unlocked else {
                    throw KeychainError(.interactionNotAllowed, "\(info.name) is locked; unlock it, or give its passcode, to compare it with the Simulator.")
                }
                return machine.keys
            }
            try twin.database.write { db in _ = try twin.keybag.rewrap(db, keys: keys, newPasscode: nil, keepingPasscodeClass: true) }
            twin.powerOff()
            var simulator = info
            simulator.format = 2
            simulator.storedProfile = .simulator
            try Self.writeInfo(simulator, to: twin.layout)
            return try Device.powerOn(at: directory, clock: twin.clock, entropy: entropy)
        } catch {
            twin.powerOff()
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Copies the powered-off device the caller holds to `copy` (which must not exist) without
    /// opening its store: even opening SQLite folds its write-ahead log into the database, and
    /// a device someone only looks at stays byte for byte as it was. Held, nothing writes to it
    /// meanwhile.
    package static func copyAtRest(_ hold: DeviceHold, to copy: URL) throws {
        let directory = hold.directory
        let files = FileManager.default
        let original = DeviceLayout(root: directory)
        let layout = DeviceLayout(root: copy)
        _ = try info(at: directory)
        do {
            try files.createDirectory(at: copy, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for (from, to) in [
                (original.hardwareUID, layout.hardwareUID), (original.info, layout.info),
                (original.apps, layout.apps), (original.database, layout.database),
            ] {
                try files.copyItem(at: from, to: to)
            }
            if files.fileExists(atPath: original.groups.path) { try files.copyItem(at: original.groups, to: layout.groups) }
            let log = URL(fileURLWithPath: original.database.path + "-wal")
            if files.fileExists(atPath: log.path) { try files.copyItem(at: log, to: URL(fileURLWithPath: layout.database.path + "-wal")) }
        } catch {
            try? files.removeItem(at: copy)
            throw DeviceError(.io, "could not copy \(directory.path) to \(copy.path): \(describe(error)).")
        }
    }

    /// Moves the device's clock forward: the lock state settles at the new time (a grace
    /// period ends), and dates written from then on are in the future. Only a device whose
    /// clock can move (a node's, a fork's) allows it.
    public func advanceClock(by seconds: TimeInterval) throws {
        guard seconds >= 0, seconds.isFinite else {
            throw DeviceError(.invalidArgument, "a device's clock only moves forward; give a positive duration.")
        }
        guard let clock = clock as? AdvancingClock else {
            throw DeviceError(.invalidArgument, "\(info.name)'s clock follows real time and cannot be moved.")
        }
        try withPower { _ in }  // a powered-off device has no clock running
        clock.advance(by: seconds)
    }

    /// How far the device's clock is ahead of real time.
    public var clockAdvance: TimeInterval { (clock as? AdvancingClock)?.advanced ?? 0 }

    /// The device's now.
    public var now: Date { clock.now() }
}
