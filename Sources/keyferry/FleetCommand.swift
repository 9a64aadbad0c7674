import ArgumentParser
import Fleet
import Foundation
import KeychainModel
import NodeControl

struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Run several devices side by side, as a fleet file describes them.",
        discussion: """
            A fleet file (YAML; ready-made ones in Peers/) names devices with their passcode, \
            biometry, grace period and apps. Each device lives in ROOT/NAME; ROOT defaults to \
            $XDG_STATE_HOME/keyferry/fleets/FLEET-FILE (else ~/.local/state/keyferry/fleets/FLEET-FILE), \
            FILE a digest of the fleet file's path, so two checkouts of one fleet never share devices. \
            Any problem in the file is reported as FILE:LINE:COLUMN: FIELD: problem, and nothing starts.
            """,
        subcommands: [Up.self, Status.self, Down.self])

    struct Up: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "up",
            abstract: "Create missing devices, start every node, unlock each and install its apps.",
            discussion: """
                Devices that exist keep their own passcode, biometry and grace period. Running \
                nodes are left running. If any device fails, or the command is interrupted (Ctrl-C), \
                the apps this command installed are uninstalled, the nodes it started stopped and the \
                devices it created removed, and it says so. A fleet file with `sync: {relay: auto}` \
                (or HOST:PORT) also gets its relay (ROOT/relay) and one circle of all its devices; \
                `auto` and --relay-port 0 pick a free port, printed at the end, which the circle keeps \
                for later `up`s. With `sync: {relay: https://HOST:PORT}` the devices join a circle \
                through a relay someone else runs (set KEYFERRY_RELAY_CA for a private CA), which the \
                fleet neither starts nor stops. Add `circle: ID` there to join a circle made elsewhere \
                (another machine's fleet): each device asks through the relay and prints its code, and \
                `up` waits until a member of the circle approves each one (`keyferry circle approve`). \
                A fleet brought up with --root is remembered, for that \
                fleet file: `up`, `status` and `down` of the same file find it without --root.
                """)
        @OptionGroup var fleet: FleetArguments
        @Option(help: "The relay's port for a new circle, instead of the file's (0: any free port).", transform: { Int(try Checked.port($0)) })
        var relayPort: Int?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            var runner = try fleet.runner()
            if relayPort != nil, runner.fleet.relay == nil {
                throw ValidationError("--relay-port is for a fleet that syncs; \(fleet.file) has no `sync:` section.")
            }
            if relayPort != nil, !runner.fleet.runsRelay {
                throw ValidationError("--relay-port is for a relay the fleet starts; \(fleet.file) syncs through one someone else runs.")
            }
            runner.relayPort = relayPort
            try runner.rememberRoot()
            // Ctrl-C or SIGTERM: `up` rolls back what it did, then reports.
            // Devices come up side by side: each arrival is progress on a terminal, and the
            // result is one line per device, in the file's order.
            let progress = ProgressLine()
            let arrivals = try await interruptibly { [runner] in
                say("\(runner.fleet.name) fleet in \(runner.root.path)")
                return try await runner.up(
                    progress: { arrival in progress.show("\(arrival.member): \(arrival.summary)") },
                    asking: { asking in
                        // For the person at a member of the circle: shown even with --json, on stderr.
                        let line =
                            "\(asking.member) asks to join circle \(asking.circle), code \(asking.code): on a member, "
                            + "`keyferry circle approve DIR \(asking.code.filter(\.isNumber))` (until \(asking.expires.formatted(date: .omitted, time: .standard)))"
                        progress.clear()
                        if Verbosity.current >= .normal { say(line) } else { printError(line) }
                    })
            }
            progress.clear()
            if output.json {
                try printJSON(encodable: arrivals)
                return
            }
            for arrival in arrivals.members {
                say("  " + runner.line(arrival.member, (arrival.device?.fleetLine ?? "") + "  (\(arrival.summary))"))
            }
            // What this `up` repaired or set up, said: a relay that had stopped, a member that
            // had left the circle.
            if arrivals.relayStarted, let relay = arrivals.relay { say("started the fleet's relay at \(relay)") }
            let joined = arrivals.members.filter(\.joinedCircle).map(\.member)
            if let circle = arrivals.circle, !joined.isEmpty { say("\(joined.joined(separator: ", ")) joined circle \(circle)") }
            if let circle = arrivals.circle, let relay = arrivals.relay {
                say("every device is in circle \(circle), syncing through the relay at \(relay)")
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "One line per device: power, lock state, item count.")
        @OptionGroup var fleet: FleetArguments
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let runner = try fleet.runner()
            let overview = try await runner.status()
            if output.json {
                try printJSON(encodable: overview)
                return
            }
            print("\(runner.fleet.name) fleet in \(runner.root.path)")
            for status in overview.members {
                print("  " + runner.line(status.member, status.device?.fleetLine ?? "not created"))
            }
            if let relay = overview.relay {
                let state = relay.running.map { $0 ? "running" : "not running" } ?? "run by someone else"
                print("  " + runner.line("relay", "\(relay.url ?? "no address yet"), \(state)"))
            }
            if let circle = overview.circle {
                print("  " + runner.line("circle", "\(circle.id) of \(circle.members.joined(separator: ", "))"))
            }
        }
    }

    struct Down: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "down",
            abstract: "Stop every node of the fleet, and its relay (the devices stay on disk).",
            discussion: """
                Stopping a fleet that is already down does nothing and says so (exit status 0); a \
                root that holds none of the fleet's devices is exit status 5 (was it brought up \
                with --root somewhere else?).
                """)
        @OptionGroup var fleet: FleetArguments
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let runner = try fleet.runner()
            let departures = try await runner.down()
            guard departures.members.contains(where: { $0.departure != .notCreated }) else {
                throw CommandFailure(
                    .notFound,
                    "no device of the \(runner.fleet.name) fleet exists in \(runner.root.path); was it brought up with --root somewhere else?")
            }
            if !departures.stoppedAny && !output.json {
                say("nothing to stop: no node or relay of the \(runner.fleet.name) fleet runs in \(runner.root.path).")
                return
            }
            if output.json {
                printJSON([
                    "members": departures.members.map { ["member": $0.member, "result": $0.departure.rawValue] },
                    "relayStopped": departures.relayStopped,
                ])
                return
            }
            say("\(runner.fleet.name) fleet in \(runner.root.path)")
            for (member, departure) in departures.members { say("  " + runner.line(member, departure.text)) }
            if departures.relayStopped { say("  " + runner.line("relay", "stopped")) }
        }
    }
}

/// The fleet file and where its devices live, for every fleet command.
struct FleetArguments: ParsableArguments {
    @Argument(help: "The fleet file (YAML), e.g. Peers/family.yaml.", completion: .file(extensions: ["yaml", "yml"]))
    var file: String
    @Option(
        help: "The fleet's directory: where up keeps its devices instead of the default; status and down find a fleet brought up with it without it.",
        completion: .directory)
    var root: String?

    /// --root, or where the fleet was brought up before (the default root for a new fleet).
    func runner() throws -> FleetRunner {
        let fleet = try FleetFile.load(URL(fileURLWithPath: file), displayName: file)
        if let root { return FleetRunner(fleet: fleet, root: URL(fileURLWithPath: root)) }
        let roots = FleetRunner.roots(of: fleet)
        guard roots.count <= 1 else {
            throw ValidationError(
                "the \(fleet.name) fleet was brought up in \(roots.count) places: \(roots.map(\.path).joined(separator: ", ")); say which with --root.")
        }
        return FleetRunner(fleet: fleet, root: roots.first)
    }
}

extension FleetRunner {
    /// `phone   TEXT`, member names in a column.
    func line(_ member: String, _ text: String) -> String {
        let width = fleet.members.map(\.id.count).max() ?? 0
        return "\(member.padded(width))  \(text)"
    }
}

extension FleetRunner.Departure {
    var text: String {
        switch self {
        case .stopped: "stopped"
        case .notRunning: "not running"
        case .notCreated: "not created"
        }
    }
}

extension FleetRunner.Arrival {
    /// What `up` did: `created, started, unlocked, 3 apps installed`.
    var summary: String {
        var steps: [String] = []
        if created { steps.append("created") }
        if started { steps.append("started") }
        if unlocked { steps.append("unlocked") }
        if !installed.isEmpty { steps.append(installed.count == 1 ? "1 app installed" : "\(installed.count) apps installed") }
        return steps.isEmpty ? "already up" : steps.joined(separator: ", ")
    }
}

extension DeviceStatus {
    /// `on   unlocked  3 items  Alice's iPhone`
    var fleetLine: String {
        let items = itemCount == 1 ? "1 item" : "\(itemCount) items"
        return "\((poweredOn ? "on" : "off").padded(4))\((lockState?.rawValue ?? "-").padded(10))\(items.padded(10))\(name)"
    }
}
