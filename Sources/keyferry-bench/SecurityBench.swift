import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferrySecurity
import Node
import NodeControl

/// Keychain Services calls through KeyferrySecurity against the calls they translate into, in
/// the same run: the typed API on the same device in this process, and the node's control
/// API through the same HTTP client.
struct SecurityBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "security",
        abstract: "SecItem calls through KeyferrySecurity against the typed API and the control API (run with -c release).",
        discussion: """
            In this process: SecItemAdd and SecItemCopyMatching against Keychain.add and Keychain.copy \
            on the same device (target: at least 0.7x their rate). Through a node: the same calls \
            against NodeClient's add and copy routes called directly, with the same HTTP client and \
            its reused connection (target: at least 0.8x). Rounds alternate between the two so the \
            machine's noise falls on both; medians of the rounds.
            """)

    @Option(help: "Calls of each kind per round in this process.") var calls = 2_000
    @Option(help: "Calls of each kind per round through the node.") var nodeCalls = 500
    @Option(help: "Rounds; the median is reported.") var rounds = 5
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard calls > 0, nodeCalls > 0, rounds > 0 else { throw ValidationError("--calls, --node-calls and --rounds must be positive.") }
    }

    struct Figure {
        var name: String
        var rate: Double
        var baseline: Double
        var target: Double
    }

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kf-bench-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let app = "com.example.bench"
        let options = DeviceOptions(name: "Bench iPhone", passcodeHashing: .minimum)

        let local = root.appendingPathComponent("local")
        let device = try Device.create(at: local, options: options)
        try device.install(AppManifest(bundleID: app, teamID: "BENCH12345"))
        let calls = calls
        let rounds = rounds
        var figures = try await onThread {
            defer { device.powerOff() }
            let context = KeyferryContext(device: device, app: app, passcode: nil)
            return try Self.compare(
                rounds: rounds, calls: calls, context: context, prefix: "local",
                typed: TypedCalls(keychain: try device.keychain(for: app)), target: 0.7)
        }

        let remote = root.appendingPathComponent("node")
        try Device.initialize(at: remote, options: options)
        _ = try await NodeLauncher.start(directory: remote, executable: try KeyferryBinary.url())
        do {
            let client = NodeClient(directory: remote)
            try await client.send(.install, AppManifest(bundleID: app, teamID: "BENCH12345"))
            let nodeCalls = nodeCalls
            figures += try await onThread {
                let context = try KeyferryContext(device: remote, app: app)
                return try Self.compare(
                    rounds: rounds, calls: nodeCalls, context: context, prefix: "node",
                    typed: NodeCalls(client: client, app: app), target: 0.8)
            }
        } catch {
            _ = try? await NodeLauncher.stop(directory: remote)
            throw error
        }
        try await NodeLauncher.stop(directory: remote)

        if json {
            printJSON(
                figures.map {
                    [
                        "name": $0.name, "perSecond": $0.rate.rounded(), "baselinePerSecond": $0.baseline.rounded(),
                        "ratio": $0.rate / $0.baseline, "target": $0.target,
                    ]
                })
            return
        }
        for figure in figures {
            print(
                String(
                    format: "%@ %8.0f /s  against %8.0f /s  %.2fx  (target >= %.1fx)",
                    figure.name.padded(34), figure.rate, figure.baseline, figure.rate / figure.baseline, figure.target))
        }
    }

    /// The calls a SecItem call becomes, made directly.
    protocol Baseline {
        func add(_ item: NewItem) throws
        func copy(_ query: ItemQuery) throws
    }

    struct TypedCalls: Baseline {
        let keychain: Keychain
        func add(_ item: NewItem) throws { _ = try keychain.add(item) }
        func copy(_ query: ItemQuery) throws { _ = try keychain.copy(query) }
    }

    struct NodeCalls: Baseline {
        let client: NodeClient
        let app: String
        func add(_ item: NewItem) throws { let _: NodeAPI.Items = try client.callSynchronously(.add, NodeAPI.Add(app: app, item: item)) }
        func copy(_ query: ItemQuery) throws { let _: NodeAPI.Items = try client.callSynchronously(.copy, NodeAPI.Search(app: app, query: query)) }
    }

    /// Adds, then reads by primary key, alternating SecItem and baseline rounds.
    static func compare(rounds: Int, calls: Int, context: KeyferryContext, prefix: String, typed: some Baseline, target: Double) throws -> [Figure] {
        let value = Data(repeating: 7, count: 256)
        var addSec: [Double] = []
        var addTyped: [Double] = []
        var copySec: [Double] = []
        var copyTyped: [Double] = []
        for round in 0..<rounds {
            let secAccounts = (0..<calls).map { "\(prefix)-sec-\(round)-\($0)" }
            let typedAccounts = (0..<calls).map { "\(prefix)-typed-\(round)-\($0)" }
            addSec.append(
                Double(calls)
                    / (try seconds {
                        try context.run {
                            for account in secAccounts {
                                let status = SecItemAdd(
                                    [
                                        kSecClass: kSecClassGenericPassword, kSecAttrService: "bench", kSecAttrAccount: account, kSecValueData: value,
                                        kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlock,
                                    ] as CFDictionary, nil)
                                guard status == errSecSuccess else { throw CommandFailure("SecItemAdd answered \(status): \(context.lastFailure ?? "")") }
                            }
                        }
                    }))
            addTyped.append(
                Double(calls)
                    / (try seconds {
                        for account in typedAccounts {
                            try typed.add(
                                NewItem(
                                    .genericPassword, attributes: [.service: .string("bench"), .account: .string(account)], data: value,
                                    protection: .afterFirstUnlock))
                        }
                    }))
            copyTyped.append(
                Double(calls)
                    / (try seconds {
                        for account in typedAccounts {
                            try typed.copy(ItemQuery(.genericPassword, attributes: [.service: .string("bench"), .account: .string(account)], returning: .data))
                        }
                    }))
            copySec.append(
                Double(calls)
                    / (try seconds {
                        try context.run {
                            for account in secAccounts {
                                var result: CFTypeRef?
                                let status = SecItemCopyMatching(
                                    [
                                        kSecClass: kSecClassGenericPassword, kSecAttrService: "bench", kSecAttrAccount: account,
                                        kSecReturnData: true,
                                    ] as CFDictionary, &result)
                                // `as? Data` is left out of the timing: on Linux, Foundation copies the
                                // NSData back byte by byte, a cost of the caller's cast, not of the call.
                                guard status == errSecSuccess, result != nil else { throw CommandFailure("SecItemCopyMatching answered \(status).") }
                            }
                        }
                    }))
        }
        let place = prefix == "local" ? "in process" : "through a node"
        return [
            Figure(name: "SecItemAdd, \(place)", rate: median(addSec), baseline: median(addTyped), target: target),
            Figure(name: "SecItemCopyMatching, \(place)", rate: median(copySec), baseline: median(copyTyped), target: target),
        ]
    }
}
