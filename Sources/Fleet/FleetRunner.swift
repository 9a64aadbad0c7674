import Foundation
import KeychainModel
import KeychainStore
import Node
import Relay

/// Brings a fleet's devices up and down as nodes, each in `ROOT/ID`.
public struct FleetRunner: Sendable {
    public let fleet: FleetFile
    public let root: URL
    /// The keyferry binary the nodes run.
    public let executable: URL

    public init(fleet: FleetFile, root: URL? = nil, executable: URL = NodeLauncher.currentExecutable) {
        self.fleet = fleet
        self.root = (root ?? Self.defaultRoot(for: fleet)).standardizedFileURL
        self.executable = executable
    }

    /// `$XDG_STATE_HOME/keyferry/fleets/NAME`, or `~/.local/state/keyferry/fleets/NAME`: the
    /// same place whatever the working directory, so `status` and `down` find what `up` made.
    public static func defaultRoot(for fleet: FleetFile) -> URL {
        let environment = ProcessInfo.processInfo.environment
        let state = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state")
        return state.appendingPathComponent("keyferry/fleets/\(fleet.name)")
    }

    public func directory(of member: FleetFile.Member) -> URL {
        root.appendingPathComponent(member.id)
    }

    /// Where the fleet's relay keeps its data, when the fleet syncs.
    public var relayDirectory: URL { root.appendingPathComponent("relay") }

    // MARK: Up

    /// What `up` did for one member.
    public struct Arrival: Codable, Sendable {
        public var member: String
        public var directory: String
        public var created = false
        public var started = false
        public var unlocked = false
        /// Bundle IDs installed by this call (apps already there are left as they are).
        public var installed: [String] = []
        public var device: DeviceStatus?
        /// The fleet's circle, when the fleet syncs.
        public var circle: UUID?
    }

    /// Creates missing devices, starts every node, unlocks each and installs the apps it lacks.
    /// Nothing starts unless every member's directory is usable. If any member fails, the apps
    /// this call installed are uninstalled, the nodes it started stopped and the devices it
    /// created removed; the error names each failure. `progress` hears each member as it is ready.
    /// A fleet that syncs then gets its relay started and every member in one circle; a failure
    /// there leaves the devices up, and `up` again finishes the circle.
    public func up(progress: @Sendable (Arrival) -> Void = { _ in }) async throws -> [Arrival] {
        try checkDirectories()
        let outcomes = await withTaskGroup(of: (Int, Arrival, (any Error)?).self) { group in
            for (index, member) in fleet.members.enumerated() {
                group.addTask {
                    var arrival = Arrival(member: member.id, directory: directory(of: member).path)
                    do {
                        try await bringUp(member, &arrival)
                        return (index, arrival, nil)
                    } catch {
                        return (index, arrival, error)
                    }
                }
            }
            var outcomes: [(Int, Arrival, (any Error)?)] = []
            for await outcome in group {
                if outcome.2 == nil { progress(outcome.1) }
                outcomes.append(outcome)
            }
            return outcomes.sorted { $0.0 < $1.0 }
        }
        let failures = outcomes.compactMap { _, arrival, error in error.map { (arrival.member, $0) } }
        guard failures.isEmpty else {
            for (_, arrival, _) in outcomes { await undo(arrival) }
            throw FleetError(failures: failures)
        }
        var arrivals = outcomes.map(\.1)
        if let address = fleet.relay {
            let circle = try await formCircle(relay: address)
            for index in arrivals.indices { arrivals[index].circle = circle }
        }
        return arrivals
    }

    /// Starts the fleet's relay unless it runs; the first member creates the circle unless it is
    /// in one, and vouches for every other member that is in none.
    private func formCircle(relay address: RelayAddress) async throws -> UUID {
        let relay = try await RelayLauncher.start(data: relayDirectory, listen: address, executable: executable)
        let clients = fleet.members.map { NodeClient(directory: directory(of: $0)) }
        var circle: NodeAPI.CircleStatus = try await clients[0].get(.circleStatus)
        if circle.circle == nil {
            circle = try await clients[0].call(.circleCreate, NodeAPI.CircleCreate(relay: relay.absoluteString, name: fleet.members[0].id))
        }
        guard let id = circle.circle else { throw NodeError.failed("\(fleet.members[0].id) did not create the fleet's circle") }
        var failures: [(String, any Error)] = []
        for (member, client) in zip(fleet.members, clients).dropFirst() {
            do {
                let own: NodeAPI.CircleStatus = try await client.get(.circleStatus)
                if own.circle == nil {
                    _ = try await client.joinCircle(sponsor: clients[0], name: member.id)
                } else if own.circle != id {
                    throw NodeError.failed("it is in another circle (\(own.circle!)) than the fleet's (\(id))")
                }
            } catch {
                failures.append((member.id, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
        return id
    }

    private func bringUp(_ member: FleetFile.Member, _ arrival: inout Arrival) async throws {
        let directory = directory(of: member)
        if !FileManager.default.fileExists(atPath: directory.path) {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            try Device.create(at: directory, options: member.deviceOptions).powerOff()
            arrival.created = true
        }
        let client = NodeClient(directory: directory)
        var device: DeviceStatus
        if let running = try? await client.status() {
            device = running.device
        } else {
            device = try await NodeLauncher.start(directory: directory, executable: executable).device
            arrival.started = true
        }
        if device.lockState != .unlocked {
            do {
                try await client.send(.unlock, NodeAPI.Unlock(passcode: member.passcode))
            } catch let error as KeychainError where error.status == .authFailed && device.passcodeSet {
                let problem = member.passcode == nil ? "the fleet file gives no passcode" : "the fleet file's passcode does not unlock it"
                throw KeychainError(.authFailed, "\(directory.path) has a passcode and \(problem): \(error.message)")
            }
            arrival.unlocked = true
        }
        let installed = Set(try await client.apps())
        for app in member.apps where !installed.contains(app) {
            try await client.send(.install, app)
            arrival.installed.append(app.bundleID)
        }
        arrival.device = try await client.status().device
    }

    /// Takes back what one `up` did to a member: the apps it installed (their sandboxes are
    /// still empty), the node it started, the device it created.
    private func undo(_ arrival: Arrival) async {
        let directory = URL(fileURLWithPath: arrival.directory)
        if !arrival.created {
            for bundleID in arrival.installed {
                try? await NodeClient(directory: directory).send(.uninstall, NodeAPI.Uninstall(bundleID: bundleID))
            }
        }
        if arrival.started { _ = try? await NodeLauncher.stop(directory: directory) }
        if arrival.created { try? FileManager.default.removeItem(at: directory) }
    }

    // MARK: Status and down

    /// One member as `status` sees it.
    public struct MemberStatus: Codable, Sendable {
        public var member: String
        public var directory: String
        /// nil when the device has not been created yet.
        public var device: DeviceStatus?
    }

    public func status() async throws -> [MemberStatus] {
        try checkDirectories()
        var statuses: [MemberStatus] = []
        for member in fleet.members {
            let directory = directory(of: member)
            let exists = FileManager.default.fileExists(atPath: directory.path)
            let device = exists ? try await NodeClient(directory: directory).deviceStatus() : nil
            statuses.append(MemberStatus(member: member.id, directory: directory.path, device: device))
        }
        return statuses
    }

    public enum Departure: String, Codable, Sendable {
        case stopped, notRunning, notCreated
    }

    /// Stops every member's node; members that are off or absent are left alone.
    public func down() async throws -> [(member: String, departure: Departure)] {
        try checkDirectories()
        return try await withThrowingTaskGroup(of: (Int, Departure).self) { group in
            for (index, member) in fleet.members.enumerated() {
                group.addTask {
                    let directory = directory(of: member)
                    guard FileManager.default.fileExists(atPath: directory.path) else { return (index, .notCreated) }
                    return (index, try await NodeLauncher.stop(directory: directory) ? .stopped : .notRunning)
                }
            }
            var departures = [Departure](repeating: .notRunning, count: fleet.members.count)
            for try await (index, departure) in group { departures[index] = departure }
            try await RelayLauncher.stop(data: relayDirectory)
            return zip(fleet.members, departures).map { ($0.id, $1) }
        }
    }

    /// Every member's directory is either absent or a device, and short enough for a socket:
    /// checked before anything starts.
    private func checkDirectories() throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw NodeError.failed("the fleet's root \(root.path) is a file; give --root a directory.")
        }
        var failures: [(String, any Error)] = []
        for member in fleet.members {
            let directory = directory(of: member)
            do {
                try NodePaths(directory: directory).requireSocketPathFits()
                if FileManager.default.fileExists(atPath: directory.path) { try Device.requireDevice(at: directory) }
            } catch {
                failures.append((member.id, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
    }
}

/// Members of a fleet that could not be brought up, checked or stopped, each with its reason.
public struct FleetError: Error, CustomStringConvertible {
    public var failures: [(member: String, error: any Error)]

    public var description: String {
        failures.map { "\($0.member): \($0.error)" }.joined(separator: "\n")
    }
}
