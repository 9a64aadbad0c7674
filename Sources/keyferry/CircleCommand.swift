import ArgumentParser
import Foundation
import KeychainModel
import NodeControl
import Relay
import SyncWire

struct CircleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "circle",
        abstract: "Form a circle of trust between running nodes, so that they sync.",
        discussion: """
            A circle's members replicate their synchronizable items (not ThisDeviceOnly, no access \
            control) through a relay (`keyferry relay serve`) that sees only sealed, signed envelopes. \
            One node creates the circle; another joins with a voucher from a member.
            """,
        subcommands: [Create.self, Join.self, Remove.self, Leave.self, Status.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Create a circle with this node as its first member.")
        @OptionGroup var device: DeviceDirectory
        @Option(help: "The relay's address, as `relay serve` printed it: http://HOST:PORT, https://HOST:PORT or HOST:PORT.", transform: Checked.relayAddress)
        var relay: RelayAddress
        @Option(help: "The name other members see (default: the device's name).", transform: Checked.name) var name: String?
        @Option(
            help: """
                A file whose first line is the admission token the relay's operator gave you, for a relay that creates circles \
                only for holders of one (`relay serve --admission token FILE`).
                """,
            completion: .file())
        var admissionToken: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let token = try admissionToken.map { file in
                guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw CommandFailure(
                        FileManager.default.fileExists(atPath: file) ? .invalidInput : .notFound, "--admission-token \(file) cannot be read as text.")
                }
                let token = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map { $0.trimmingCharacters(in: .whitespaces) }
                guard let token, !token.isEmpty else { throw CommandFailure(.invalidInput, "--admission-token \(file) holds no token on its first line.") }
                return token
            }
            let status: NodeAPI.CircleStatus = try await device.client.call(
                .circleCreate, NodeAPI.CircleCreate(relay: relay.url.absoluteString, name: name, admissionToken: token))
            try present(status, json: output.json)
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "join", abstract: "Join the circle of a member, which vouches for this node.",
            discussion: """
                Both nodes must be running on this machine, and this one unlocked since it was powered on. \
                The sponsor signs an entry admitting this node and seals it the circle's keys; this node \
                checks both against the relay and only then publishes the entry. A join that fails \
                changes nothing, on either side. With --relay this node syncs through another relay than \
                the sponsor's: one serving the same database (`relay serve --database`).
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(help: "The device directory of a member that vouches for this node.", completion: .directory) var sponsor: String
        @Option(help: "The name other members see (default: the device's name).", transform: Checked.name) var name: String?
        @Option(help: "Sync through this relay instead of the sponsor's: another relay on the same database.", transform: Checked.relayAddress)
        var relay: RelayAddress?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let status = try await device.client.joinCircle(
                sponsor: NodeClient(directory: URL(fileURLWithPath: sponsor)), name: name, relay: relay?.url.absoluteString)
            try present(status, json: output.json)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove a member; the others get new keys it cannot open.",
            discussion: """
                The removed device keeps what it already holds, and receives nothing written after the \
                others learn of its removal; `circle leave` on it forgets the circle. A device takes \
                itself out with `circle leave`, not remove.
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(
            help:
                "The member to remove: its device directory on this machine, its name, or the start of its key (8 hex digits or more) when two share a name, as `circle status` lists them."
        )
        var peer: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try present(try await device.client.call(.circleRemove, NodeAPI.CircleRemove(peer: try await member())), json: output.json)
        }

        /// A device directory stands for the member it is, by its key: names may repeat.
        private func member() async throws -> String {
            let directory = URL(fileURLWithPath: peer)
            guard FileManager.default.fileExists(atPath: DeviceLayout(root: directory).info.path) else { return peer }
            let status = try await NodeClient(directory: directory).circleStatus()
            guard let me = status.members.first(where: { $0.isThisDevice == true }) else {
                throw CommandFailure(
                    .notFound, "\(peer) is a device in no circle, or one that does not know its own key; name the member as `circle status` lists it.")
            }
            return me.signingKey
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "leave", abstract: "Take this node out of its circle, and forget the circle's keys.",
            discussion: """
                A member publishes its own removal, with new keys for the members that stay, so they \
                go on without it. A device that was removed only forgets the circle, so it can join \
                one again. The items it received stay on it. While the relay cannot be reached, leave \
                fails with nothing changed (within 30 seconds if it accepts but does not answer). With --force it \
                forgets the circle even then; the others count it as a member until one of them \
                removes it (`circle remove`).
                """)
        @OptionGroup var device: DeviceDirectory
        @Flag(help: "Forget the circle here even if the relay cannot be told.") var force = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let status: NodeAPI.CircleStatus
            do {
                status = try await device.client.call(.circleLeave, NodeAPI.CircleLeave(force: force))
            } catch let error as CircleError where error.code == .notInCircle {
                // Leaving is done once the device is in no circle, whoever got it there.
                if output.json {
                    try printJSON(encodable: try await device.client.get(.circleStatus) as NodeAPI.CircleStatus)
                } else {
                    say("nothing to do: \(error.message)")
                }
                return
            }
            if output.json { try printJSON(encodable: status) } else { say("left the circle; in no circle now") }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status", abstract: "The circle this device is in, and its members; of a powered-off device, as it last read them.")
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try present(try await device.client.circleStatus(), json: output.json)
        }
    }
}

private func present(_ status: NodeAPI.CircleStatus, json: Bool) throws {
    if json { return try printJSON(encodable: status) }
    guard let circle = status.circle else { return print("in no circle") }
    print("circle \(circle) through \(status.relay ?? "?"), key generation \(status.epoch ?? 0)")
    if status.poweredOff == true { print("  powered off: the membership as the device last read it; it syncs once its node starts") }
    if status.removed == true { print("  this device was removed from the circle and no longer syncs; `keyferry circle leave` forgets it") }
    if status.sealedUntilUnlock == true { print("  sealed until the device is first unlocked; it syncs from then on") }
    for member in status.members {
        print("  \(member.name.escapingControlCharacters)\(member.isThisDevice == true ? " (this device)" : "")  \(member.signingKey.prefix(16))…")
    }
}
