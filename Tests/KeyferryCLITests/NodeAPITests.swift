import Foundation
import KeychainModel
import KeychainTesting
import Node
import NodeControl
import Testing

/// The control API itself, through `NodeClient`, against a node of the built binary.
@Suite("Node control API", .blocking)
struct NodeAPITests {
    @Test("the backup route never replaces what is at its path: a directory there stays, with its files")
    func backupNeverReplaces() async throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let documents = cli.root.appendingPathComponent("Documents")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: documents.appendingPathComponent("letter.txt"))
        let client = NodeClient(directory: URL(fileURLWithPath: dir))
        let refusal = await #expect(throws: (any Error).self) {
            _ = try await client.call(.backup, NodeAPI.Backup(path: documents.path, password: nil))
        }
        #expect(String(describing: refusal).contains("already exists"), "\(String(describing: refusal))")
        #expect(try Data(contentsOf: documents.appendingPathComponent("letter.txt")) == Data("keep me".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: cli.root.path).filter { $0.hasPrefix(".Documents") }.isEmpty)
    }

    @Test("a relay address no URL can hold is a refused request, and the node runs on")
    func unusableRelayAddress() async throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let client = NodeClient(directory: URL(fileURLWithPath: dir))
        for relay in ["a b:80", "https://a b:443", "user@host:80"] {
            let refusal = await #expect(throws: (any Error).self) {
                let _: NodeAPI.CircleStatus = try await client.call(.circleCreate, NodeAPI.CircleCreate(relay: relay, name: "phone"))
            }
            #expect(String(describing: refusal).contains("is not a relay address"), "\(String(describing: refusal))")
        }
        #expect(try cli.status(dir)["lockState"] != nil, "the node still answers")
    }

    // Not dumpable is set too, but cannot be seen from outside by root (CI's user), for whom
    // every /proc file stays readable.
    @Test("a node's memory stays out of core files and its log: core size limit 0, soft and hard; no register dump on a trap")
    func memoryPrivate() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let pid = try #require(try cli.ok(["node", "status", dir, "--json"]).object()["pid"] as? Int)
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"], "\(core)")
        // Its environment: closed to its own user (not dumpable), or, to root, showing that a
        // trap's backtrace writes no register dump into node.log.
        if let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") {
            let variables = String(decoding: environment, as: UTF8.self).split(separator: "\0")
            #expect(variables.contains { $0.hasPrefix("SWIFT_BACKTRACE=") && $0.hasSuffix("registers=none") }, "\(variables.filter { $0.hasPrefix("SWIFT") })")
        } else {
            #expect(getuid() != 0, "root reads every environment")
        }
    }

    @Test("copy-many answers each query in order; a failing one fails alone, with its status")
    func copyMany() async throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        let app = ["--app", "com.example.mail"]
        try cli.ok(["item", "add", dir] + app + ["--account", "a", "--value", "secret-a"])
        try cli.ok(["item", "add", dir] + app + ["--account", "b", "--value", "secret-b", "--accessible", "afterFirstUnlock"])
        let client = NodeClient(directory: URL(fileURLWithPath: dir))
        func query(_ account: String) -> ItemQuery {
            ItemQuery(.genericPassword, attributes: [.account: .string(account)], returning: .data)
        }
        let batch = NodeAPI.SearchMany(app: "com.example.mail", queries: [query("a"), query("missing"), query("b")])

        let unlocked: NodeAPI.FoundMany = try await client.call(.copyMany, batch)
        #expect(unlocked.results.count == 3)
        #expect(try unlocked.results[0].get().first?.data == Data("secret-a".utf8))
        let missing = #expect(throws: KeychainError.self) { try unlocked.results[1].get() }
        #expect(missing?.status == .itemNotFound)
        #expect(try unlocked.results[2].get().first?.data == Data("secret-b".utf8))

        // Locked: the whenUnlocked item is unreadable, the afterFirstUnlock one still reads.
        try cli.ok(["device", "lock", dir, "--now"])
        let locked: NodeAPI.FoundMany = try await client.call(.copyMany, batch)
        #expect((locked.results[0].failure?.error as? KeychainError)?.status == .interactionNotAllowed)
        #expect(try locked.results[2].get().first?.data == Data("secret-b".utf8))

        // An app that is not installed fails the whole call, as `copy` would.
        await #expect(throws: DeviceError.self) {
            let _: NodeAPI.FoundMany = try await client.call(.copyMany, NodeAPI.SearchMany(app: "com.example.none", queries: [query("a")]))
        }
    }
}
