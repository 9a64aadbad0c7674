public import ArgumentParser
import Backup
import Foundation
public import KeychainModel
import KeychainStore
import Node
public import NodeControl

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Create a device and drive its lock state, passcode and biometry.",
        discussion: "Every command but init and status needs the device's node running (`keyferry node start DIR`).",
        subcommands: [Init.self, Status.self, Unlock.self, Lock.self, Passcode.self, Biometry.self, Security.self, Clock.self])

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create a new device in DIR (powered off; start it with `keyferry node start DIR`).")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The device's name, as circle members and reports show it (default: the directory's name).", transform: Checked.name)
        var name: String?
        /// The passcode the device is given, if any.
        @OptionGroup var passcode: PasscodeInput
        @Flag(help: "Enroll biometry (needs a passcode).") var biometry = false
        @Option(help: "How long class A keys stay in memory after the screen locks: 10s, 1m (a bare number is seconds).", transform: Checked.duration)
        var grace: TimeInterval = 10
        @Option(
            help: ArgumentHelp(
                "What the device behaves as.",
                discussion: DeviceProfile.allCases.map { "\($0.rawValue): \($0.summary)" }.joined(separator: "; ") + "."),
            transform: { try DeviceProfile(named: $0) })
        var profile: DeviceProfile = .iphone
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if biometry && !passcode.given && !profile.reportsPasscodeSet {
                throw ValidationError("--biometry needs a passcode: iOS enrolls biometry only on a device with a passcode.")
            }
            if passcode.given && !profile.hasPasscodeSetting {
                throw ValidationError("the iOS Simulator has no passcode to set; leave the passcode out, or use --profile iphone.")
            }
        }

        /// The directory's name, so that two devices made alike are told apart in a circle, as a
        /// fleet's are by their ids.
        private var defaultName: String {
            (try? Checked.name(device.url.standardizedFileURL.lastPathComponent)) ?? profile.deviceName
        }

        func run() async throws {
            try Device.initialize(
                at: device.url,
                options: DeviceOptions(
                    name: name ?? defaultName, passcode: try passcode.read(), enrollBiometry: biometry, gracePeriod: grace, profile: profile))
            let status = try Device.status(at: device.url)
            if output.json { try printJSON(encodable: status) } else { say("created \(status.name) in \(device.dir) (powered off)") }
        }
    }

    struct Clock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clock",
            abstract: "Show a running device's clock, or move it forward so grace periods and 30-day windows pass without waiting.",
            discussion: "The clock follows real time, plus every advance; it never goes back, and a restarted node starts again at real time.")

        @OptionGroup var device: DeviceDirectory
        @Option(parsing: .unconditional, help: "Move the clock forward by this much: 90s, 10m, 1h30m, 30d.", transform: Checked.duration)
        var advance: TimeInterval?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let state: NodeAPI.ClockState = try await device.client.call(.clock, NodeAPI.Clock(advance: advance ?? 0))
            if output.json {
                try printJSON(encodable: state)
                return
            }
            let ahead = state.advanced > 0 ? " (\(Self.span(state.advanced)) ahead of real time)" : " (real time)"
            say("\(device.dir): \(state.now.formatted(.iso8601))\(ahead)")
        }

        /// `1d 2h 5m 3s`, leaving out what is zero.
        static func span(_ seconds: TimeInterval) -> String {
            var rest = Int(seconds.rounded())
            var parts: [String] = []
            for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] where rest >= size || (unit == "s" && parts.isEmpty) {
                parts.append("\(rest / size)\(unit)")
                rest %= size
            }
            return parts.joined(separator: " ")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show power, lock state (before first unlock, unlocked, locked), passcode, biometry and Stolen Device Protection.")

        @OptionGroup var device: DeviceDirectory
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await printStatus(device, json: output.json)
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unlock", abstract: "Unlock with the passcode. A wrong one is errSecAuthFailed and counts a failed attempt.")

        @OptionGroup var device: DeviceDirectory
        @OptionGroup var passcode: PasscodeInput
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let hasPasscode = try await device.client.deviceStatus().passcodeSet
            if passcode.given, !hasPasscode {
                throw ValidationError("this device has no passcode; unlock it without one.")
            }
            let typed = hasPasscode ? try passcode.readOrAsk("Passcode of \(device.dir): ") : nil
            if hasPasscode && typed == nil {
                throw KeychainError(.authFailed, "this device has a passcode; give it with --passcode-file F, --passcode-stdin, or --passcode.")
            }
            try await device.send(.unlock, NodeAPI.Unlock(passcode: typed), json: output.json)
        }
    }

    struct Lock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "lock", abstract: "Lock the screen; class A keys go when the grace period ends.")

        @OptionGroup var device: DeviceDirectory
        @Flag(help: "Skip the grace period: class A keys leave memory at once.") var now = false
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await device.send(.lock, NodeAPI.Lock(immediately: now), json: output.json)
        }
    }

    struct Passcode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "passcode",
            abstract: "Set, change or remove the passcode (the device must be unlocked).",
            discussion: "Removing the passcode destroys every whenPasscodeSetThisDeviceOnly item, as on iOS.")

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The new passcode (visible in the process list; prefer --set-file).", transform: Checked.passcode) var set: String?
        @Option(help: "Read the new passcode from this file's first line.", completion: .file()) var setFile: String?
        @Flag(help: "Remove the passcode.") var remove = false
        @Option(
            help:
                "The current passcode, needed to change or remove one (visible in the process list; prefer --current-file, or leave it out to be asked on a terminal).",
            transform: Checked.passcode)
        var current: String?
        @Option(help: "Read the current passcode from this file's first line.", completion: .file()) var currentFile: String?
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard [set != nil, setFile != nil, remove].filter({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --set NEW, --set-file F or --remove.")
            }
            guard current == nil || currentFile == nil else { throw ValidationError("give the current passcode once: --current or --current-file.") }
        }

        func run() async throws {
            if set != nil { warnPasscodeInArgv("--set", instead: "--set-file F") }
            if current != nil { warnPasscodeInArgv("--current", instead: "--current-file F, or leaving it out to be asked") }
            let hasPasscode = try await device.client.deviceStatus().passcodeSet
            let given = current != nil || currentFile != nil
            if !hasPasscode && given { throw ValidationError("this device has no passcode; leave --current out.") }
            if !hasPasscode && remove { throw ValidationError("this device has no passcode to remove.") }
            var old = try current ?? currentFile.map { try PasscodeInput.read(file: $0, what: "current passcode") }
            if hasPasscode && old == nil { old = PasscodeInput.ask("Current passcode of \(device.dir): ") }
            guard !hasPasscode || old != nil else {
                throw KeychainError(
                    .authFailed, "this device has a passcode; give it with --current-file F or --current OLD, or run this on a terminal to be asked.")
            }
            let new = try set ?? setFile.map { try PasscodeInput.read(file: $0, what: "new passcode") }
            // What a removal destroys, read before it: the secrets the user came to learn about.
            let doomed =
                remove ? try await device.client.call(.list, NodeAPI.List(app: nil)).items.filter { $0.protection == .whenPasscodeSetThisDeviceOnly } : []
            let biometry = remove ? try await device.client.deviceStatus().biometryEnrolled : false
            try await device.send(.passcode, NodeAPI.Passcode(new: new, current: old, remove: remove), json: output.json)
            guard remove else { return }
            let names = doomed.map { item in (ArchivedItem.name { item.attributes[$0] } ?? item.uuid.uuidString).escapingControlCharacters }
            say(
                doomed.isEmpty
                    ? "no whenPasscodeSetThisDeviceOnly item to delete"
                    : "deleted \(doomed.count.items(as: "whenPasscodeSetThisDeviceOnly item")): \(names.joined(separator: ", "))")
            if biometry { say("biometry turned off with the passcode, as on iOS") }
        }
    }

    struct Biometry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "biometry",
            abstract: "Enroll, change or remove biometry (on an unlocked device).",
            usage: "keyferry device biometry <dir> (--enroll | --change | --remove) [--json] [--quiet]",
            discussion: "--change simulates a new face or finger: items with biometryCurrentSet stop opening.")

        @OptionGroup var device: DeviceDirectory
        @Flag(exclusivity: .exclusive, help: "What to do.") var action: NodeAPI.BiometryAction
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await device.send(.biometry, NodeAPI.Biometry(action: action), json: output.json)
        }
    }
}

extension DeviceCommand {
    struct Security: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "security",
            abstract: "Stolen Device Protection, and whether the device is away from its familiar locations.",
            usage: "keyferry device security <dir> [--stolen-device-protection off|away|always] [--away | --familiar] [--json]",
            discussion: """
                With the protection on (the default from iOS 26.4, off before; none before iOS 17.3), a \
                passcode and Face ID enrolled, and the device away from its familiar locations (or the \
                protection set to always), changing or removing the passcode, adding, changing or removing \
                Face ID, and turning the protection off wait for a one-hour Security Delay: the first \
                request starts it and is refused (exit 6); the same request after an hour of the \
                device's clock (`device clock --advance 1h`) goes through. Back at a familiar location, \
                the delay ends early.
                """)

        @OptionGroup var device: DeviceDirectory
        @Option(help: "off, away (the delay applies away from familiar locations) or always.")
        var stolenDeviceProtection: StolenDeviceProtection?
        @Flag(exclusivity: .exclusive, help: "Where the device is.") var location: Location?
        @OptionGroup var output: OutputOptions

        enum Location: EnumerableFlag {
            case away, familiar
            static func help(for value: Self) -> ArgumentHelp? {
                value == .away ? "Away from its familiar locations (home, work)." : "At a familiar location."
            }
        }

        func run() async throws {
            if stolenDeviceProtection != nil || location != nil {
                try await device.client.send(.security, NodeAPI.Security(stolenDeviceProtection: stolenDeviceProtection, away: location.map { $0 == .away }))
            }
            let status = try await device.client.deviceStatus()
            guard let security = status.security else {
                throw CommandFailure("\(status.name) behaves as \(status.profile.rawValue), which has no Stolen Device Protection.")
            }
            if output.json { try printJSON(encodable: security) } else { say(security.summary) }
        }
    }
}

extension StolenDeviceProtection: ExpressibleByArgument {}

extension SecuritySettings {
    /// `Stolen Device Protection: away from familiar locations; the device is away; Security Delay: changing the passcode (started)`.
    var summary: String {
        let mode =
            switch stolenDeviceProtection {
            case .off: "off"
            case .away: "on away from familiar locations"
            case .always: "on everywhere"
            }
        var text = "Stolen Device Protection \(mode); the device is \(away ? "away" : "at a familiar location")"
        let started = delaysStarted.keys.sorted { $0.rawValue < $1.rawValue }.map(\.summary)
        if !started.isEmpty { text += "; Security Delay under way for " + started.joined(separator: ", ") }
        return text
    }
}

extension NodeAPI.BiometryAction: EnumerableFlag {
    public static func help(for value: Self) -> ArgumentHelp? {
        switch value {
        case .enroll: "Enroll a face or finger."
        case .change: "Replace the enrollment (invalidates biometryCurrentSet items)."
        case .remove: "Remove biometry."
        }
    }
}

extension DeviceDirectory {
    /// Sends one request to the node, then shows the device's status: what every lock,
    /// passcode and biometry command prints.
    /// (The status line confirms the change: --quiet leaves it out.)
    func send<Body>(_ route: NodeAPI.Route<Body, NodeAPI.Empty>, _ body: Body, json: Bool) async throws {
        try await client.send(route, body)
        let status = try await client.deviceStatus()
        if json { try printJSON(encodable: status) } else { say(status.summary) }
    }
}

func printStatus(_ device: DeviceDirectory, json: Bool) async throws {
    let status = try await device.client.deviceStatus()
    if json { try printJSON(encodable: status) } else { print(status.summary) }
}

extension DeviceStatus {
    /// One line: `Alice's iPhone: on, unlocked, passcode set, Face ID enrolled, 3 items`.
    var summary: String {
        var parts: [String] =
            switch profile {
            case .iphone: []
            case .iphoneIOS17: ["iOS 17.3–26.3"]
            case .iphoneIOS16: ["before iOS 17.3"]
            case .simulator: ["iOS Simulator"]
            case .mac: ["Mac"]
            }
        parts.append(poweredOn ? "on" : "off")
        if let lockState {
            let words = lockState == .beforeFirstUnlock ? "before first unlock" : lockState.rawValue
            parts.append(words + (graceRemaining.map { String(format: " (class A keys for %.0f s more)", $0) } ?? ""))
        }
        parts.append(passcodeSet ? "passcode set" : "no passcode")
        parts.append(biometryEnrolled ? "\(profile.biometry) enrolled" : "no biometry")
        if failedPasscodeAttempts > 0 { parts.append(failedPasscodeAttempts.items(as: "failed passcode attempt")) }
        if let passcodeRetryAfter { parts.append(String(format: "disabled for %.0f s more", passcodeRetryAfter.rounded(.up))) }
        parts.append(itemCount == 1 ? "1 item" : "\(itemCount) items")
        // Stolen Device Protection, when it holds anything back: away, or a delay running.
        if let security, security.away || !security.delaysStarted.isEmpty {
            if security.away { parts.append("away from familiar locations") }
            for change in security.delaysStarted.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
                parts.append("Security Delay running for \(change.summary)")
            }
        }
        return "\(name.escapingControlCharacters): " + parts.joined(separator: ", ")
    }
}
