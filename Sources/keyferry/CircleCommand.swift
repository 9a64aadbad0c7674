import ArgumentParser
import Foundation
import KeychainModel
import KeyferryCrypto
import KeyferryThreads
import Node
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
            One node creates the circle. Another joins from anywhere that reaches the relay: it asks \
            (`circle join DIR --circle ID --relay URL`) and shows a code; a member lists the requests \
            (`circle requests`), compares the code, and approves or declines it. Or a member hands it a \
            voucher file (`circle identity` on the joiner, `circle vouch --for` on the member, \
            `circle join --voucher`), or vouches for it directly on the same machine (`--sponsor`).
            """,
        subcommands: [
            Create.self, Join.self, Requests.self, Approve.self, Decline.self, Identity.self, Vouch.self, Remove.self, Leave.self, Status.self,
        ])

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
            commandName: "join", abstract: "Join a circle: ask through its relay, take a voucher file, or have a member on this machine vouch.",
            discussion: """
                With --circle ID --relay URL, this node asks to join through the relay alone and prints a \
                six-digit code; on a member (any machine), `circle requests` lists the request with its code \
                and `circle approve DIR CODE` admits it. This command waits until a member answers or the \
                request expires (--expires-in). Until then the node holds nothing of the circle. \
                With --voucher FILE, it joins with a voucher a member wrote (`circle vouch --out`). \
                With --sponsor DIR, a member running on this machine vouches for it at once. \
                Either way this node checks the voucher against the relay before it publishes anything: \
                a join that fails changes nothing, on any member or the relay. The node must be running, \
                and unlocked since it was powered on.
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(help: "The circle to ask to join, as `circle status` prints it on a member (with --relay).", transform: Checked.uuid)
        var circle: UUID?
        @Option(help: "A voucher file a member wrote for this device (`circle vouch --out`).", completion: .file()) var voucher: String?
        @Option(help: "The device directory of a member on this machine that vouches for this node.", completion: .directory) var sponsor: String?
        @Option(help: "The name other members see (default: the device's name).", transform: Checked.name) var name: String?
        @Option(
            help: """
                The relay: with --circle, the one to ask through; with --voucher or --sponsor, another relay than the \
                voucher's to sync through, serving the same database (`relay serve --database`).
                """,
            transform: Checked.relayAddress)
        var relay: RelayAddress?
        @Option(help: "With --circle: how long the request waits for a member's answer, in minutes (1 to 60).")
        var expiresIn: Int = 10
        @OptionGroup var output: OutputOptions

        func validate() throws {
            let modes = [circle != nil, voucher != nil, sponsor != nil].filter { $0 }.count
            guard modes == 1 else { throw ValidationError("give one of --circle (with --relay), --voucher or --sponsor.") }
            if circle != nil, relay == nil { throw ValidationError("--circle asks through a relay: give its address with --relay.") }
            guard (1...60).contains(expiresIn) else { throw ValidationError("--expires-in is 1 to 60 minutes.") }
            if circle == nil, expiresIn != 10 { throw ValidationError("--expires-in is for a request (--circle).") }
            if voucher != nil, name != nil { throw ValidationError("a voucher names this device already: leave --name out.") }
        }

        func run() async throws {
            let status: NodeAPI.CircleStatus
            if let circle, let relay {
                status = try await ask(circle, relay)
            } else if let voucher {
                let bytes = try readVoucher(voucher)
                let (circle, named) = try voucherDestination(bytes, file: voucher)
                status = try await device.client.call(
                    .circleJoin, NodeAPI.Voucher(circle: circle, relay: relay?.url.absoluteString ?? named, voucher: bytes))
            } else {
                status = try await device.client.joinCircle(
                    sponsor: NodeClient(directory: URL(fileURLWithPath: sponsor!)), name: name, relay: relay?.url.absoluteString)
            }
            try present(status, json: output.json)
        }

        /// Publishes the request, shows its code, and waits for a member's answer.
        private func ask(_ circle: UUID, _ relay: RelayAddress) async throws -> NodeAPI.CircleStatus {
            let client = device.client
            let requested = try await client.call(
                .circleRequest, NodeAPI.CircleRequest(relay: relay.url.absoluteString, circle: circle, name: name, lifetime: Double(expiresIn * 60)))
            // The code is for the person at the member: shown even with --json, on stderr.
            let line =
                "asked to join circle \(circle) as \(requested.name), code \(requested.code); on a member, run "
                + "`keyferry circle requests DIR` and `keyferry circle approve DIR \(requested.code.filter(\.isNumber))` "
                + "(waiting until \(requested.expires.formatted(date: .omitted, time: .standard)))"
            if Verbosity.current >= .normal { say(line) } else { printError(line) }
            return try await client.joinedCircle(requested)
        }
    }

    struct Requests: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "requests", abstract: "The devices asking to join this node's circle, with the code each shows.",
            discussion: """
                Approve one only when the code matches the one its device shows (`circle approve DIR CODE`). \
                A request expires when its device stops waiting; answered ones are not listed.
                """)
        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let pending: NodeAPI.PendingJoins = try await device.client.get(.circleRequests)
            if output.json { return try printJSON(encodable: pending) }
            guard !pending.requests.isEmpty else { return print("no device is asking to join") }
            for request in pending.requests {
                print(
                    "code \(request.code)  \(request.name.escapingControlCharacters)  \(request.signingKey.prefix(16))…  "
                        + "until \(request.expires.formatted(date: .omitted, time: .standard))")
            }
        }
    }

    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "approve", abstract: "Admit the device whose request shows this code.",
            discussion: """
                Publishes a voucher for it on the relay; the device checks it and joins. Compare the code \
                with the one the device shows first: a code two devices' requests share is refused (decline both).
                """)
        @OptionGroup var device: DeviceDirectory
        @Argument(help: "The six-digit code the asking device shows (spaces and dashes allowed).") var code: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let approved: NodeAPI.PendingJoin = try await device.client.call(.circleApprove, NodeAPI.CircleAnswer(code: code))
            if output.json { return try printJSON(encodable: approved) }
            say("approved \(approved.name) (\(approved.signingKey.prefix(16))…); it joins when it reads the voucher")
        }
    }

    struct Decline: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "decline", abstract: "Refuse the device (or devices) whose request shows this code.")
        @OptionGroup var device: DeviceDirectory
        @Argument(help: "The six-digit code of the request (spaces and dashes allowed).") var code: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let declined: NodeAPI.PendingJoins = try await device.client.call(.circleDecline, NodeAPI.CircleAnswer(code: code))
            if output.json { return try printJSON(encodable: declined) }
            say("declined " + declined.requests.map { "\($0.name) (\($0.signingKey.prefix(16))…)" }.joined(separator: ", "))
        }
    }

    struct Identity: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "identity", abstract: "This device's public identity, for a member to vouch for (`circle vouch --for`).",
            discussion: """
                Public keys only. Refused while the device is in a circle, and before its first unlock. \
                The code it prints is the one the member's `circle vouch` prints for the same file.
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(help: "Write the identity to this file (JSON) instead of printing it.", completion: .file()) var out: String?
        @Option(help: "The name other members see (default: the device's name).", transform: Checked.name) var name: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            var peer: NodeAPI.Peer = try await device.client.get(.circleIdentity)
            peer.isThisDevice = nil
            if let name { peer.name = name }
            let code = try identityCode(peer)
            guard let out else {
                // The identity on stdout, for a file; its code for the person, on stderr.
                if Verbosity.current >= .normal { printError("code \(code)") }
                return output.json ? try printJSON(encodable: peer) : print(try jsonText(peer), terminator: "")
            }
            try writeNew(Data(try jsonText(peer).utf8), to: out)
            if output.json { return try printJSON(encodable: peer) }
            say("wrote \(out): \(peer.name), code \(code); hand it to a member for `keyferry circle vouch DIR --for \(out) --out VOUCHER`")
        }
    }

    struct Vouch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "vouch", abstract: "Write a voucher file admitting a device, for `circle join --voucher` on it.",
            discussion: """
                FILE is the device's identity (`circle identity --out`); compare the code printed here with the \
                one the device printed. The voucher admits that device only, once, into the circle as it is \
                now: if the circle changes first (a member joins or is removed), ask for a new one. It holds \
                the circle's current key sealed to the device: only that device can open it.
                """)
        @OptionGroup var device: DeviceDirectory
        @Option(name: .customLong("for"), help: "The joining device's identity file (`circle identity --out`).", completion: .file())
        var identity: String
        @Option(help: "Where to write the voucher (a new file).", completion: .file()) var out: String
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let data = try readInput(identity, what: "the identity file", limit: joinFileBytes)
            guard data.count <= joinFileBytes, let peer = try? NodeAPI.decoder.decode(NodeAPI.Peer.self, from: data) else {
                throw CommandFailure(.invalidInput, "--for \(identity) is not an identity file (JSON with name, signingKey and encryptionKey).")
            }
            let code = try identityCode(peer)
            guard !FileManager.default.fileExists(atPath: out) else { throw CommandFailure(.invalidInput, "--out \(out) exists already; name a new file.") }
            let voucher: NodeAPI.Voucher = try await device.client.call(.circleVouch, NodeAPI.Vouch(peer: peer))
            try writeNew(voucher.voucher, to: out)
            if output.json { return try printJSON(encodable: voucher) }
            say("wrote \(out): a voucher for \(peer.name.escapingControlCharacters), code \(code), to circle \(voucher.circle) through \(voucher.relay)")
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

/// The code a device's identity shows, as `circle requests` shows it for its requests.
private func identityCode(_ peer: NodeAPI.Peer) throws -> JoinCode {
    guard let signing = Hex.decode(peer.signingKey).flatMap({ try? SigningPublicKey(bytes: $0) }),
        let sealing = Hex.decode(peer.encryptionKey).flatMap({ try? SealingPublicKey(bytes: $0) })
    else { throw CommandFailure(.invalidInput, "the identity's keys are not 32 bytes each in hex") }
    return JoinCode(PeerIdentity(name: peer.name, signing: signing, sealing: sealing))
}

private func jsonText(_ peer: NodeAPI.Peer) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return String(decoding: try encoder.encode(peer), as: UTF8.self) + "\n"
}

/// Writes a file that did not exist, whole or not at all.
private func writeNew(_ data: Data, to path: String) throws {
    guard !FileManager.default.fileExists(atPath: path) else { throw CommandFailure(.invalidInput, "\(path) exists already; name a new file.") }
    do { try data.write(to: URL(fileURLWithPath: path), options: [.atomic]) } catch {
        throw CommandFailure(.failure, "\(path) cannot be written: \(error.localizedDescription)")
    }
}

/// The most an identity file or a voucher holds (a join record is at most 4 KiB): a larger
/// file is neither, and is not read past that.
private let joinFileBytes = 4_096

private func readVoucher(_ path: String) throws -> Data {
    try readInput(path, what: "the voucher", limit: joinFileBytes)
}

/// The circle and relay a voucher file names, read before the node is asked, so a file that is
/// no voucher is named as such.
private func voucherDestination(_ data: Data, file: String) throws -> (UUID, String) {
    guard data.count <= joinFileBytes, let voucher = try? Voucher(bytes: [UInt8](data)) else {
        throw CommandFailure(.invalidInput, "--voucher \(file) is not a voucher (a file `circle vouch --out` writes)")
    }
    return (voucher.circle, voucher.relay.absoluteString)
}
