import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import Relay
import RelayPostgres
import Sync
import SyncWire

/// A relay's storage while a circle's members update the same items again and again: with
/// compaction it stays near one version of everything, and members still end with every
/// item's newest version.
struct CompactionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-compaction",
        abstract: "A relay's storage while members update the same items: at most 2x one version of everything (run with -c release).",
        discussion: """
            A circle of --members members (three of them running sync engines on devices of their own, \
            the others signing batches here) updates --items items --updates times, each round every \
            item by a member picked at random, each member pushing its round's versions as one batch. \
            The baseline, in the same run, is one version of everything: the bytes of the last round's \
            batches. The relay's bytes are its records' bytes for the circle (membership, keys, batches \
            and compaction notes). One device syncs every tenth round, one only at the start and the end, \
            one only at the end: each must end with exactly the last round's versions (the model). With \
            --database (or KEYFERRY_POSTGRES) the run is repeated on PostgreSQL.
            """)

    @Option(help: "Members of the circle, at least 4.") var members = 100
    @Option(help: "Items of the circle.") var items = 1_000
    @Option(help: "Times each item is updated.") var updates = 100
    @Option(help: "Also run on this PostgreSQL database, postgres://USER@HOST[:PORT]/DATABASE.") var database: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard members >= 4, items >= 1, updates >= 1 else { throw ValidationError("--members at least 4, --items and --updates at least 1.") }
    }

    struct Figures {
        var storage: String
        var oneVersion: Int
        var pushed: Int
        var held: Int
        var peak: Int
        var notes: Int
        var seconds: Double
        var ratio: Double { Double(held) / Double(oneVersion) }
    }

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-compaction-bench-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        var results = [try await measure(storage: try SQLiteRelayStorage(directory: root.appendingPathComponent("relay")), named: "sqlite", in: root)]
        if let url = database ?? ProcessInfo.processInfo.environment["KEYFERRY_POSTGRES"] {
            let postgres = try PostgresRelayDatabase(url: url, password: ProcessInfo.processInfo.environment[PostgresRelayDatabase.passwordVariable])
            results.append(
                try await PostgresRelayStorage.withStorage(postgres) { storage in
                    try await measure(storage: storage, named: "postgresql", in: root.appendingPathComponent("pg"))
                })
        }
        if json {
            printJSON(
                results.map {
                    [
                        "storage": $0.storage, "members": members, "items": items, "updates": updates, "oneVersionBytes": $0.oneVersion,
                        "pushedBytes": $0.pushed, "relayBytes": $0.held, "peakRelayBytes": $0.peak, "compactionNotes": $0.notes,
                        "ratioToOneVersion": ($0.ratio * 100).rounded() / 100, "pushSeconds": ($0.seconds * 100).rounded() / 100, "target": 2.0,
                    ] as [String: Any]
                })
            return
        }
        print("\(members) members, \(items) items, each updated \(updates) times; every device ends with the model")
        for result in results {
            print(
                "\(result.storage.padded(11)) one version \(result.oneVersion.formatted()) B   pushed \(result.pushed.formatted()) B   "
                    + "relay holds \(result.held.formatted()) B (peak \(result.peak.formatted()) B, \(result.notes) notes)   "
                    + "\(String(format: "%.2f", result.ratio))x one version (target <= 2.0x)   pushes took \(String(format: "%.1f", result.seconds)) s")
        }
    }

    /// One run on `storage`: the circle made, the rounds pushed, the devices checked.
    private func measure(storage: any RelayStorage, named name: String, in directory: URL) async throws -> Figures {
        let relay = LocalRelay(storage: storage)
        let relayURL = URL(string: "http://relay.invalid")!
        let creator = DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey())
        var history = CircleHistory(creator: creator, name: "member-0")
        let circle = history.circle
        let keys = CircleKeys(circle: circle, epoch: history.epoch)
        let authors = [creator] + (1..<(members - 3)).map { _ in DeviceIdentity(signingSeed: SymmetricKey(), sealingSeed: SymmetricKey()) }
        for (index, author) in authors.enumerated().dropFirst() {
            try history.append(MembershipEntry(.join, subject: author.peer(named: "member-\(index)"), after: history, signer: creator.signingKey))
        }
        try await relay.push(history.entries.map(\.bytes), circle: circle, stream: .membership, proof: nil)
        let keyRecords = [KeyRecord.classKeys(PublishedClassKeys(keys, wrapped: keys.wrappedClassKeys(), signer: creator.signingKey)).bytes]
        try await relay.push(
            keyRecords, circle: circle, stream: .keys, proof: PushProof(signing: keyRecords, circle: circle, stream: .keys, key: creator.signingKey))

        // The three devices join through vouchers the creator signs.
        let app = AppManifest(bundleID: "com.example.bench", teamID: "BENCH12345")
        var devices: [Device] = []
        var engines: [SyncEngine] = []
        defer { for device in devices { device.powerOff() } }
        for deviceName in ["often", "away", "late"] {
            let device = try Device.create(at: directory.appendingPathComponent(deviceName), options: DeviceOptions(name: deviceName, passcode: "123456"))
            try device.install(app)
            devices.append(device)
            let peer = try await SyncEngine.peerIdentity(of: device, name: deviceName)
            let entry = MembershipEntry(.join, subject: peer, after: history, signer: creator.signingKey)
            let voucher = Voucher(
                circle: circle, relay: relayURL, head: ContentDigest.of(history.entries.last!.bytes), request: nil, entry: entry,
                shares: [CircleKeyShare(keys, to: peer.sealing, from: creator.signingKey)], sponsor: creator.signingKey)
            engines.append(try await SyncEngine.join(voucher, device: device, transport: relay))
            try history.append(entry)
        }
        _ = try await engines[1].sync()

        let uuids = (0..<items).map { _ in UUID() }
        let base = Date().addingTimeInterval(-86_400)
        var links: [SigningPublicKey: BatchLink] = [:]
        var random = SystemRandomNumberGenerator()
        var (pushed, lastRound, peak) = (0, 0, 0)
        var seconds = 0.0
        for round in 1...updates {
            var byAuthor: [Int: [Int]] = [:]
            for item in 0..<items { byAuthor[Int.random(in: 0..<authors.count, using: &random), default: []].append(item) }
            lastRound = 0
            for (index, itemsOfAuthor) in byAuthor {
                let author = authors[index].signingKey
                let envelopes = try itemsOfAuthor.map { item in
                    try sealedEnvelope(version(of: item, uuid: uuids[item], round: round, base: base), keys: keys, author: author.publicKey)
                }
                let batches = EnvelopeBatch.batches(of: envelopes, circle: circle, author: author, after: links[author.publicKey] ?? .start)
                links[author.publicKey] = batches.last!.link
                let bodies = batches.map(\.bytes)
                let proof = PushProof(signing: bodies, circle: circle, stream: .envelopes, key: author)
                let start = ContinuousClock.now
                try await relay.push(bodies, circle: circle, stream: .envelopes, proof: proof)
                let took = ContinuousClock.now - start
                seconds += took.seconds
                let size = bodies.reduce(0) { $0 + $1.count }
                pushed += size
                lastRound += size
            }
            peak = max(peak, try await storage.byteCount(circle: circle))
            if round % 10 == 0 { _ = try await settle(engines[0]) }
        }
        for engine in engines { try await settle(engine) }

        // The model: the last round's version of every item, on every device.
        let model = Dictionary(uniqueKeysWithValues: (0..<items).map { ("acct-\($0)", "item-\($0)-round-\(updates)") })
        for device in devices {
            var held: [String: String] = [:]
            for change in try device.deviceKeychain.changes(since: 0, includingData: true) where change.record.synchronizable && !change.isTombstone {
                guard case .string(let account)? = change.record.attributes[.account] else { continue }
                held[account] = String(decoding: change.record.data ?? Data(), as: UTF8.self).trimmingCharacters(in: .whitespaces)
            }
            guard held == model else {
                let wrong = model.filter { held[$0.key] != $0.value }.count
                throw CommandFailure("\(name): device '\(device.info.name)' differs from the model on \(wrong) of \(items) items")
            }
        }
        let served = try await storage.records(circle: circle, stream: .envelopes, after: 0, limit: RelayWire.maximumPullRecords)
        return Figures(
            storage: name, oneVersion: lastRound, pushed: pushed, held: try await storage.byteCount(circle: circle), peak: peak,
            notes: served.filter { CompactedBatches.isNote($0.body) }.count, seconds: seconds)
    }

    /// Item `item`'s version of `round`: a password whose secret names both.
    private func version(of item: Int, uuid: UUID, round: Int, base: Date) -> SyncedItem {
        let modified = base.addingTimeInterval(Double(round))
        return SyncedItem(
            version: HybridTimestamp(milliseconds: UInt64(modified.timeIntervalSince1970 * 1000)), isTombstone: false,
            record: ItemRecord(
                itemClass: .genericPassword, uuid: uuid, accessGroup: "BENCH12345.com.example.bench", protection: .afterFirstUnlock,
                synchronizable: true, accessControl: nil, creationDate: base, modificationDate: modified,
                attributes: [.account: .string("acct-\(item)"), .service: .string("bench")],
                data: Data("item-\(item)-round-\(round)".padding(toLength: 64, withPad: " ", startingAt: 0).utf8)))
    }

    /// Syncs until a pass brings nothing more.
    private func settle(_ engine: SyncEngine) async throws {
        while true {
            let report = try await engine.sync()
            if report.applied == 0 && !report.more { return }
        }
    }
}

/// `item` sealed as a member's keychain seals it (a key of its own), in its envelope.
func sealedEnvelope(_ item: SyncedItem, keys: CircleKeys, author: SigningPublicKey) throws -> SealedEnvelope {
    let seal = ItemSeal.sealing(item.record)
    return try SealedEnvelope.seal(
        KeyedItem(
            uuid: item.record.uuid, itemClass: item.record.itemClass, protection: item.record.protection, version: item.version,
            isTombstone: false, key: seal.key, metadata: seal.metadata, secret: seal.secret),
        keys: keys, author: author)
}
