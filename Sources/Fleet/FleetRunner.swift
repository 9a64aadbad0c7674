package import Foundation
package import KeychainModel
import KeychainStore
import Node
import NodeControl
import Relay

/// Brings a fleet's devices up and down as nodes, each in `ROOT/ID`.
package struct FleetRunner: Sendable {
    package let fleet: FleetFile
    package let root: URL
    /// The keyferry binary the nodes run.
    package let executable: URL
    /// The port a new circle's relay listens on instead of the file's (0: any free one).
    package var relayPort: Int?

    package init(fleet: FleetFile, root: URL? = nil, executable: URL = NodeLauncher.currentExecutable) {
        self.fleet = fleet
        self.root = (root ?? Self.defaultRoot(for: fleet)).standardizedFileURL
        self.executable = executable
    }

    /// `$XDG_STATE_HOME/keyferry`, or `~/.local/state/keyferry`.
    private static var stateDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let state =
            environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state")
        return state.appendingPathComponent("keyferry")
    }

    /// `STATE/fleets/NAME-FILE`: the same place whatever the working directory, so `status`
    /// and `down` find what `up` made, and a place of its own for each fleet file (FILE is a
    /// digest of its path), so two checkouts of one fleet, or two jobs, never meet.
    package static func defaultRoot(for fleet: FleetFile) -> URL {
        stateDirectory.appendingPathComponent("fleets/\(key(of: fleet))")
    }

    /// The fleet's name, and a digest of the file it came from (FNV-1a, 32 bits in hex: a name,
    /// not a secret).
    private static func key(of fleet: FleetFile) -> String {
        guard let source = fleet.source else { return fleet.name }
        var hash: UInt32 = 2_166_136_261
        for byte in source.path.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return fleet.name + "-" + String(hash, radix: 16)
    }

    // MARK: Where a fleet was brought up

    /// `STATE/fleet-roots/NAME-FILE.json`: the other roots the fleet of that file was brought up
    /// in (`--root`).
    private static func rootsRecord(for fleet: FleetFile) -> URL {
        stateDirectory.appendingPathComponent("fleet-roots/\(key(of: fleet)).json")
    }

    private static func rememberedRoots(of fleet: FleetFile) -> [URL] {
        let data = (try? Data(contentsOf: rootsRecord(for: fleet))) ?? Data()
        return ((try? JSONDecoder().decode([String].self, from: data)) ?? []).map { URL(fileURLWithPath: $0) }
    }

    /// Records this root, unless it is the default one, so that `status` and `down` find the
    /// fleet without `--root`. Roots that no longer hold any of the fleet's devices are forgotten.
    package func rememberRoot() throws {
        guard root != Self.defaultRoot(for: fleet).standardizedFileURL else { return }
        let roots = Self.rememberedRoots(of: fleet).filter { $0 != root && holdsDevices($0) } + [root]
        let record = Self.rootsRecord(for: fleet)
        try FileManager.default.createDirectory(at: record.deletingLastPathComponent(), withIntermediateDirectories: true)
        try JSONEncoder().encode(roots.map(\.path)).write(to: record, options: .atomic)
    }

    /// Where the fleet's devices are, for a command given no `--root`: the default root and
    /// every remembered one that holds at least one of its devices.
    package static func roots(of fleet: FleetFile) -> [URL] {
        let probe = FleetRunner(fleet: fleet)
        var found: [URL] = []
        for root in [probe.root] + rememberedRoots(of: fleet) where !found.contains(root) && probe.holdsDevices(root) {
            found.append(root)
        }
        return found
    }

    private func holdsDevices(_ root: URL) -> Bool {
        fleet.members.contains { FileManager.default.fileExists(atPath: root.appendingPathComponent("\($0.id)/device.json").path) }
    }

    package func directory(of member: FleetFile.Member) -> URL {
        root.appendingPathComponent(member.id)
    }

    /// Where the fleet's relay keeps its data, when the fleet syncs.
    package var relayDirectory: URL { root.appendingPathComponent("relay") }

    // MARK: Up

    /// What `up` did for one member.
    package struct Arrival: Codable, Sendable {
        package var member: String
        package var directory: String
        package var created = false
        package var started = false
        package var unlocked = false
        /// Bundle IDs installed by this call (apps already there are left as they are).
        package var installed: [String] = []
        package var device: DeviceStatus?
        /// This call put the member in the fleet's circle (it created it, or joined it).
        package var joinedCircle = false
    }

    /// What `up` did: each member, and the fleet's relay and circle when it syncs.
    package struct Arrivals: Codable, Sendable {
        package var members: [Arrival]
        package var circle: UUID?
        package var relay: String?
        /// This call started the fleet's relay: a first `up`, or a relay that had stopped.
        package var relayStarted = false
    }

    /// How many members come up together: each creation hashes a passcode with 64 MiB of
    /// Argon2id and each start is a process, so a large fleet queues rather than piles up.
    static let membersAtOnce = 4

    /// Creates missing devices, starts every node, unlocks each and installs the apps it lacks.
    /// Nothing starts unless every member's directory is usable. If any member fails, or the
    /// task is cancelled (Ctrl-C), the apps this call installed are uninstalled, the nodes it
    /// started stopped and the devices it created removed; the error names each failure and
    /// what was rolled back. `progress` hears each member as it is ready. A fleet that syncs
    /// then gets its relay started and every member in one circle; a failure there leaves the
    /// devices up, and `up` again finishes the circle.
    package func up(progress: @Sendable (Arrival) -> Void = { _ in }, asking: @Sendable (Asking) -> Void = { _ in }) async throws -> Arrivals {
        try checkDirectories()
        let rootExisted = FileManager.default.fileExists(atPath: root.path)
        let outcomes = await withTaskGroup(of: (Int, Arrival, (any Error)?).self) { group in
            var waiting = Array(fleet.members.enumerated()).makeIterator()
            func bringUpNext() {
                guard let (index, member) = waiting.next() else { return }
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
            for _ in 0..<Self.membersAtOnce { bringUpNext() }
            var outcomes: [(Int, Arrival, (any Error)?)] = []
            for await outcome in group {
                if outcome.2 == nil { progress(outcome.1) }
                outcomes.append(outcome)
                if !Task.isCancelled { bringUpNext() }
            }
            return outcomes.sorted { $0.0 < $1.0 }
        }
        let interrupted = Task.isCancelled
        let failures = outcomes.compactMap { _, arrival, error in error.map { (arrival.member, $0) } }
            .filter { !(interrupted && $0.1 is CancellationError) }
        guard failures.isEmpty && !interrupted else {
            var rolledBack: [(String, String)] = []
            for (_, arrival, _) in outcomes {
                // In a task of its own: the cancelled one would stop the undoing too.
                let undone = await Task { [self] in await undo(arrival) }.value
                if !undone.isEmpty { rolledBack.append((arrival.member, undone.joined(separator: ", "))) }
            }
            // The root this `up` made goes too, once nothing is left in it.
            if !rootExisted, (try? FileManager.default.contentsOfDirectory(atPath: root.path))?.isEmpty == true {
                try? FileManager.default.removeItem(at: root)
            }
            throw FleetError(failures: failures, rolledBack: rolledBack, interrupted: interrupted)
        }
        var arrivals = Arrivals(members: outcomes.map(\.1))
        if let address = fleet.relay {
            let formed =
                if let circle = fleet.circle {
                    try await joinCircle(circle, relay: address, asking: asking)
                } else {
                    try await formCircle(relay: address)
                }
            arrivals.circle = formed.circle
            arrivals.relay = formed.relay.absoluteString
            arrivals.relayStarted = formed.relayStarted
            for index in arrivals.members.indices where formed.joined.contains(arrivals.members[index].member) {
                arrivals.members[index].joinedCircle = true
            }
        }
        return arrivals
    }

    /// Starts the fleet's relay unless it runs (or someone else runs it), where the circle's
    /// members know it (the address a first `up` chose); the first member creates the circle
    /// unless it is in one, and vouches for every other member that is in none.
    private func formCircle(relay file: RelayAddress) async throws -> (circle: UUID, relay: URL, relayStarted: Bool, joined: Set<String>) {
        let clients = fleet.members.map { NodeClient(directory: directory(of: $0)) }
        var circle: NodeAPI.CircleStatus = try await clients[0].get(.circleStatus)
        guard var address = file.on(port: relayPort ?? file.port) else {
            throw NodeError(.invalidRequest, "\(relayPort ?? file.port) is not a port; give the relay one from 0 to 65535.")
        }
        if circle.circle != nil, let known = circle.relay.flatMap(RelayAddress.init) {
            if let relayPort, relayPort != 0, relayPort != known.port {
                throw NodeError(
                    .conflict,
                    "the fleet's circle syncs through \(known), which its members know; it cannot move to port \(relayPort), and stays on \(known.port).")
            }
            address = known
        }
        let relayStarted = fleet.runsRelay && RelayLauncher.running(data: relayDirectory) == nil
        let relay = fleet.runsRelay ? try await RelayLauncher.start(data: relayDirectory, listen: address, executable: executable) : address.url
        var joined: Set<String> = []
        if circle.circle == nil {
            circle = try await clients[0].call(.circleCreate, NodeAPI.CircleCreate(relay: relay.absoluteString, name: fleet.members[0].id))
            joined.insert(fleet.members[0].id)
        }
        guard let id = circle.circle else { throw NodeError(.conflict, "\(fleet.members[0].id) did not create the fleet's circle") }
        var failures: [(String, any Error)] = []
        for (member, client) in zip(fleet.members, clients).dropFirst() {
            do {
                var own: NodeAPI.CircleStatus = try await client.get(.circleStatus)
                // Removed from the fleet's circle: out of it, as one that left, so it joins again.
                if own.circle == id, own.removed == true {
                    own = try await client.call(.circleLeave, NodeAPI.CircleLeave(force: true))
                }
                if own.circle == nil {
                    _ = try await client.joinCircle(sponsor: clients[0], name: member.id)
                    joined.insert(member.id)
                } else if own.circle != id {
                    throw NodeError(.conflict, "it is in another circle (\(own.circle!)) than the fleet's (\(id))")
                }
            } catch {
                failures.append((member.id, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
        return (id, relay, relayStarted, joined)
    }

    /// A member's request to join a circle made elsewhere, with the code a member of it
    /// approves (`circle approve DIR CODE`).
    package struct Asking: Sendable {
        package var member: String
        package var circle: UUID
        package var code: String
        package var expires: Date
    }

    /// Every member not in `circle` asks to join it through the relay someone else runs, and
    /// waits until a member of the circle approves its code (`asking` hears each request, to
    /// show the code); one declined, or whose request expires, fails, and `up` again asks anew.
    private func joinCircle(
        _ circle: UUID, relay address: RelayAddress, asking: @Sendable (Asking) -> Void
    ) async throws -> (circle: UUID, relay: URL, relayStarted: Bool, joined: Set<String>) {
        var failures: [(String, any Error)] = []
        var waiting: [(member: String, client: NodeClient, asked: NodeAPI.CircleRequested)] = []
        for member in fleet.members {
            let client = NodeClient(directory: directory(of: member))
            do {
                var own: NodeAPI.CircleStatus = try await client.get(.circleStatus)
                if own.circle == circle, own.removed == true { own = try await client.call(.circleLeave, NodeAPI.CircleLeave(force: true)) }
                if own.circle == circle { continue }
                if let other = own.circle { throw NodeError(.conflict, "it is in another circle (\(other)) than the fleet's (\(circle))") }
                let asked = try await client.call(.circleRequest, NodeAPI.CircleRequest(relay: address.url.absoluteString, circle: circle, name: member.id))
                asking(Asking(member: member.id, circle: circle, code: asked.code, expires: asked.expires))
                waiting.append((member.id, client, asked))
            } catch {
                failures.append((member.id, error))
            }
        }
        // One member after another: an approval stays on the relay until its device reads it,
        // so waiting for each in turn loses no time.
        var joined: Set<String> = []
        for (member, client, asked) in waiting {
            do {
                _ = try await client.joinedCircle(asked)
                joined.insert(member)
            } catch {
                failures.append((member, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
        return (circle, address.url, false, joined)
    }

    private func bringUp(_ member: FleetFile.Member, _ arrival: inout Arrival) async throws {
        let directory = directory(of: member)
        if !FileManager.default.fileExists(atPath: directory.path) {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            try Device.initialize(at: directory, options: member.deviceOptions)
            arrival.created = true
        }
        let client = NodeClient(directory: directory)
        var device: DeviceStatus
        if let running = try? await client.status() {
            device = running.device
        } else {
            // Counted before it is done: an interruption while the node comes up still stops it.
            arrival.started = true
            device = try await NodeLauncher.start(directory: directory, executable: executable).device
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
    /// still empty), the node it started, the device it created. Returns what it undid.
    private func undo(_ arrival: Arrival) async -> [String] {
        let directory = URL(fileURLWithPath: arrival.directory)
        var undone: [String] = []
        if !arrival.created {
            for bundleID in arrival.installed
            where (try? await NodeClient(directory: directory).send(.uninstall, NodeAPI.Uninstall(bundleID: bundleID))) != nil {
                undone.append("\(bundleID) uninstalled")
            }
        }
        if arrival.started, (try? await NodeLauncher.stop(directory: directory)) == true { undone.append("node stopped") }
        if arrival.created, (try? FileManager.default.removeItem(at: directory)) != nil { undone.append("device removed") }
        return undone
    }

    // MARK: Status and down

    /// One member as `status` sees it.
    package struct MemberStatus: Codable, Sendable {
        package var member: String
        package var directory: String
        /// nil when the device has not been created yet.
        package var device: DeviceStatus?
    }

    /// The fleet as `status` shows it: each member, and for a fleet that syncs its relay and
    /// its circle (as the first running member sees it).
    package struct Overview: Codable, Sendable {
        package var members: [MemberStatus]
        package var relay: RelayState?
        package var circle: CircleState?
    }

    package struct RelayState: Codable, Sendable {
        package var url: String?
        /// nil for a relay someone else runs.
        package var running: Bool?
    }

    package struct CircleState: Codable, Sendable {
        package var id: UUID
        package var members: [String]
        /// The member that answered was removed from it.
        package var removed: Bool
    }

    package func status() async throws -> Overview {
        try checkDirectories()
        var overview = Overview(members: [])
        for member in fleet.members {
            let directory = directory(of: member)
            let exists = FileManager.default.fileExists(atPath: directory.path)
            let device = exists ? try await NodeClient(directory: directory).deviceStatus() : nil
            overview.members.append(MemberStatus(member: member.id, directory: directory.path, device: device))
        }
        guard let address = fleet.relay else { return overview }
        // A running member's view first; a powered-off one still says what circle it is in, and
        // through which relay, as it last read them.
        let members = overview.members.filter { $0.device != nil }.sorted { ($0.device?.poweredOn == true) && $1.device?.poweredOn != true }
        var circle: NodeAPI.CircleStatus?
        for member in members where circle?.circle == nil {
            circle = try? await NodeClient(directory: URL(fileURLWithPath: member.directory)).circleStatus()
        }
        if fleet.runsRelay {
            let url = RelayLauncher.running(data: relayDirectory)
            overview.relay = RelayState(url: (url?.absoluteString ?? circle?.relay), running: url != nil)
        } else {
            overview.relay = RelayState(url: address.url.absoluteString, running: nil)
        }
        if let circle, let id = circle.circle {
            overview.circle = CircleState(id: id, members: circle.members.map(\.name), removed: circle.removed == true)
        }
        return overview
    }

    package enum Departure: String, Codable, Sendable {
        case stopped, notRunning, notCreated
    }

    /// What `down` did: each member's departure, and whether the fleet's relay was stopped.
    package struct Departures: Sendable {
        package var members: [(member: String, departure: Departure)]
        package var relayStopped: Bool
        /// Whether anything was running at all.
        package var stoppedAny: Bool { relayStopped || members.contains { $0.departure == .stopped } }
    }

    /// Stops every member's node and the fleet's relay; members that are off or absent are left
    /// alone. A member that cannot be stopped (its node hung) does not keep the others or the
    /// relay running: every stop is tried, then the failures are thrown together.
    package func down() async throws -> Departures {
        try checkDirectories()
        let outcomes = await withTaskGroup(of: (Int, Result<Departure, any Error>).self) { group in
            for (index, member) in fleet.members.enumerated() {
                group.addTask {
                    let directory = directory(of: member)
                    guard FileManager.default.fileExists(atPath: directory.path) else { return (index, .success(.notCreated)) }
                    do {
                        return (index, .success(try await NodeLauncher.stop(directory: directory) ? .stopped : .notRunning))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var outcomes: [(Int, Result<Departure, any Error>)] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes.sorted { $0.0 < $1.0 }.map(\.1)
        }
        var failures: [(String, any Error)] = []
        var relayStopped = false
        do {
            relayStopped = fleet.runsRelay ? try await RelayLauncher.stop(data: relayDirectory) : false
        } catch {
            failures.append(("relay", error))
        }
        var departures: [(member: String, departure: Departure)] = []
        for (member, outcome) in zip(fleet.members, outcomes) {
            switch outcome {
            case .success(let departure): departures.append((member.id, departure))
            case .failure(let error): failures.append((member.id, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
        return Departures(members: departures, relayStopped: relayStopped)
    }

    /// Every member's directory is either absent or a device, and short enough for a socket:
    /// checked before anything starts.
    private func checkDirectories() throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw NodeError(.unusablePath, "the fleet's root \(root.path) is a file, not a directory.", subject: root.path)
        }
        var failures: [(String, any Error)] = []
        for member in fleet.members {
            let directory = directory(of: member)
            do {
                try NodePaths(directory: directory).requireSocketPathFits()
                if FileManager.default.fileExists(atPath: directory.path) {
                    try DeviceLayout(root: directory).requireDevice()
                    let made = try Device.info(at: directory).profile
                    if made != member.profile {
                        throw DeviceError(
                            .invalidArgument,
                            "\(directory.path) was made as \(made.rawValue) and the fleet file says \(member.profile.rawValue); "
                                + "a device keeps its profile: remove the directory to make it again, or change `profile:`.")
                    }
                }
            } catch {
                failures.append((member.id, error))
            }
        }
        if !failures.isEmpty { throw FleetError(failures: failures) }
    }
}

/// Members of a fleet that could not be brought up, checked or stopped, each with its reason,
/// and what was rolled back because of them (or of an interruption).
package struct FleetError: Error, CustomStringConvertible {
    package var failures: [(member: String, error: any Error)]
    package var rolledBack: [(member: String, undone: String)] = []
    /// Ctrl-C (SIGINT) or SIGTERM stopped `up` before it finished.
    package var interrupted = false

    /// The members' kind of problem when they share one (every member's passcode was wrong),
    /// else a failure.
    package var kind: ProblemKind {
        let kinds = Set(failures.map { ($0.error as? any CodedError)?.kind ?? .failure })
        return kinds.count == 1 ? kinds.first! : .failure
    }

    package init(failures: [(member: String, error: any Error)], rolledBack: [(member: String, undone: String)] = [], interrupted: Bool = false) {
        self.failures = failures
        self.rolledBack = rolledBack
        self.interrupted = interrupted
    }

    package var description: String {
        var lines = failures.map { "\($0.member): \($0.error)" }
        if interrupted { lines.append("interrupted before every device was up") }
        if !rolledBack.isEmpty {
            lines.append("rolled back: " + rolledBack.map { "\($0.member) (\($0.undone))" }.joined(separator: "; "))
        } else if interrupted || !failures.isEmpty {
            lines.append("nothing needed rolling back")
        }
        return lines.joined(separator: "\n")
    }
}
