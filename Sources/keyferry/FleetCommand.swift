import ArgumentParser
import Fleet
import Foundation
import KeychainStore
import Node

struct FleetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet",
        abstract: "Run several devices side by side, as a fleet file describes them.",
        discussion: """
            A fleet file (YAML; ready-made ones in Peers/) names devices with their passcode, \
            biometry, grace period and apps. Each device lives in ROOT/NAME; ROOT defaults to \
            $XDG_STATE_HOME/keyferry/fleets/FLEET (else ~/.local/state/keyferry/fleets/FLEET). \
            Any problem in the file is reported as FILE:LINE:COLUMN: FIELD: problem, and nothing starts.
            """,
        subcommands: [Up.self, Status.self, Down.self])

    struct Up: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "up", 
            abstract: "Create missing devices, start every node, unlock each and install its apps.",
            discussion: """
                Devices that exist keep their own passcode, biometry and grace period. Running \
                nodes are left running. If any device fails, the apps this command installed are \
                uninstalled, the nodes it started stopped and the devices it created removed. A fleet \
                file with `sync: {relay: HOST:PORT}` also gets its relay (ROOT/relay) and one circle \
                of all its devices; `down` stops the relay too.
                """)
        @OptionGroup var fleet: FleetArguments
        @OptionGroup var output: JSONFlag

        func run() async throws {
            let runner = try fleet.runner()
            if !output.json { print("\(runner.fleet.name) fleet in \(runner.root.path)") }
            let arrivals = try await runner.up { arrival in
                if !output.json { print("  " + runner.line(arrival.member, arrival.summary)) }
            }
            if output.json { try printJSON(encodable: arrivals); return }
            for arrival in arrivals {
                print(runner.line(arrival.member, arrival.device?.fleetLine ?? ""))
            }
            if let circle = arrivals.first?.circle, let relay = RelayLauncher.running(data: runner.relayDirectory) {
                print("every device is in circle \(circle), syncing through the relay at \(relay.absoluteString)")
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "status", 
            abstract: "One line per device: power, lock state, item count.")
        @OptionGroup var fleet: FleetArguments
        @OptionGroup var output: JSONFlag

        func run() async throws {
            let runner = try fleet.runner()
            let statuses = try await runner.status()
            if output.json { try printJSON(encodable: statuses); return }
            for status in statuses {
                print(runner.line(status.member, status.device?.fleetLine ?? "not created"))
            }
        }
    }

    struct Down: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "down", abstract: "Stop every node of the fleet (the devices stay on disk).")
        @OptionGroup var fleet: FleetArguments
        @OptionGroup var output: JSONFlag

        func run() async throws {
            let runner = try fleet.runner()
            let departures = try await runner.down()
            if output.json {
                printJSON(departures.map { ["member": $0.member, "result": $0.departure.rawValue] })
                return
            }
            for (member, departure) in departures { print(runner.line(member, departure.text)) }
        }
    }
}

/// The fleet file and where its devices live, for every fleet command.
struct FleetArguments: ParsableArguments {
    @Argument(help: "The fleet file (YAML), e.g. Peers/family.yaml.", completion: .file(extensions: ["yaml", "yml"]))
    var file: String
    @Option(help: "Keep the fleet's devices in this directory instead of the default.", completion: .directory)
    var root: String?

    func runner() throws -> FleetRunner {
        let fleet = try FleetFile.load(URL(fileURLWithPath: file), displayName: file)
        return FleetRunner(fleet: fleet, root: root.map { URL(fileURLWithPath: $0) })
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
