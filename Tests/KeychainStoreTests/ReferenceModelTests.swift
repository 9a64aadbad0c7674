import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import Testing

/// A plaintext model of the keychain rules, small enough to check by eye: a list of generic
/// passwords in insertion order and the lock state. The engine must agree with it on every
/// status and every returned secret.
struct ReferenceKeychain {
    struct Item: Equatable {
        var account: String
        var service: String
        var synchronizable: Bool
        var protection: ProtectionClass
        var label: String?
        var data: Data
    }

    /// Locked: class A keys stay until `keysUntil` (the end of the grace period).
    enum State { case beforeFirstUnlock, unlocked, locked(keysUntil: Double) }

    var items: [Item] = []
    var state: State = .unlocked
    var now: Double = 0
    let grace: Double

    func available(_ protection: ProtectionClass) -> Bool {
        switch (protection.availability, state) {
        case (.always, _): true
        case (.afterFirstUnlock, .beforeFirstUnlock): false
        case (.afterFirstUnlock, _): true
        case (.whenUnlocked, .unlocked): true
        case (.whenUnlocked, .locked(let keysUntil)): now < keysUntil
        case (.whenUnlocked, .beforeFirstUnlock): false
        }
    }

    struct Query {
        var account: String?
        var service: String?
        var synchronizable: SynchronizableMatch
        var protection: ProtectionClass?
        var limit: Int?
    }

    func matches(_ query: Query) -> [Int] {
        var found = [Int]()
        for (index, item) in items.enumerated() {
            guard query.account.map({ $0 == item.account }) ?? true, query.service.map({ $0 == item.service }) ?? true,
                  query.synchronizable.values.contains(item.synchronizable),
                  query.protection.map({ $0 == item.protection }) ?? true else { continue }
            found.append(index)
            if let limit = query.limit, found.count >= limit { break }
        }
        return found
    }

    func samePrimaryKey(_ a: Item, _ b: Item) -> Bool {
        a.account == b.account && a.service == b.service && a.synchronizable == b.synchronizable
    }

    mutating func add(_ item: Item) -> KeychainStatus {
        guard available(item.protection) else { return .interactionNotAllowed }
        guard !items.contains(where: { samePrimaryKey($0, item) }) else { return .duplicateItem }
        items.append(item)
        return .success
    }

    func copy(_ query: Query) -> (KeychainStatus, [Data]) {
        let found = matches(query)
        guard !found.isEmpty else { return (.itemNotFound, []) }
        guard found.allSatisfy({ available(items[$0].protection) }) else { return (.interactionNotAllowed, []) }
        return (.success, found.map { items[$0].data })
    }

    struct Changes {
        var account: String?
        var protection: ProtectionClass?
        var label: String?
        var data: Data?
    }

    mutating func update(_ query: Query, _ changes: Changes) -> KeychainStatus {
        let found = matches(query)
        guard !found.isEmpty else { return .itemNotFound }
        var working = items
        for index in found {
            guard available(working[index].protection) else { return .interactionNotAllowed }
            var item = working[index]
            item.account = changes.account ?? item.account
            item.protection = changes.protection ?? item.protection
            item.label = changes.label ?? item.label
            item.data = changes.data ?? item.data
            guard available(item.protection) else { return .interactionNotAllowed }
            if working.indices.contains(where: { $0 != index && samePrimaryKey(working[$0], item) }) { return .duplicateItem }
            working[index] = item
        }
        items = working
        return .success
    }

    mutating func delete(_ query: Query) -> KeychainStatus {
        let found = Set(matches(query))
        guard !found.isEmpty else { return .itemNotFound }
        items = items.enumerated().filter { !found.contains($0.offset) }.map(\.element)
        return .success
    }
}

@Suite("Engine against the reference model")
struct ReferenceModelTests {
    static let accounts = ["alice", "bob", "carol"]
    static let services = ["mail", "chat"]

    @Test("seeded random operation sequences give the same statuses and secrets", arguments: 1...12)
    func agreesWithModel(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let t = try TestDevice(grace: 10, seed: seed)
        let keychain = try t.keychain()
        var model = ReferenceKeychain(grace: 10)
        var seen = [KeychainStatus: Int]()

        func randomQuery(limit: Bool) -> (ReferenceKeychain.Query, ItemQuery) {
            let account = Bool.random(using: &random) ? Self.accounts.randomElement(using: &random) : nil
            let service = Bool.random(using: &random) ? Self.services.randomElement(using: &random) : nil
            let sync = [SynchronizableMatch.no, .yes, .any].randomElement(using: &random)!
            // A rare accessibility filter reproduces the phantom mismatch along the way.
            let protection = Int.random(in: 0..<8, using: &random) == 0 ? ProtectionClass.allCases.randomElement(using: &random) : nil
            let limit = limit ? [1, nil].randomElement(using: &random)! : nil
            var attributes = Attributes()
            if let account { attributes[.account] = .string(account) }
            if let service { attributes[.service] = .string(service) }
            let query = ItemQuery(.genericPassword, attributes: attributes, protection: protection, synchronizable: sync,
                                  matchLimit: limit == 1 ? .one : .all,
                                  returning: .data)
            return (ReferenceKeychain.Query(account: account, service: service, synchronizable: sync, protection: protection, limit: limit), query)
        }

        for step in 0..<250 {
            let context = "seed \(seed) step \(step)"
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                let item = ReferenceKeychain.Item(
                    account: Self.accounts.randomElement(using: &random)!, service: Self.services.randomElement(using: &random)!,
                    synchronizable: Bool.random(using: &random), protection: ProtectionClass.allCases.randomElement(using: &random)!,
                    label: nil, data: Data("v\(step)".utf8))
                let expected = model.add(item)
                let actual = status {
                    try keychain.add(NewItem(.genericPassword, attributes: [.account: .string(item.account), .service: .string(item.service)],
                                             data: item.data, protection: item.protection, synchronizable: item.synchronizable))
                }
                #expect(actual == expected, "add: \(context)")
                seen[expected, default: 0] += 1
            case 30..<55:
                let (modelQuery, query) = randomQuery(limit: true)
                let (expected, expectedData) = model.copy(modelQuery)
                var actualData = [Data]()
                let actual = status { actualData = try keychain.copy(query).compactMap(\.data) }
                #expect(actual == expected, "copy: \(context)")
                seen[expected, default: 0] += 1
                #expect(actualData == expectedData, "copy data: \(context)")
            case 55..<70:
                var (modelQuery, query) = randomQuery(limit: false)
                query.matchLimit = nil
                query.returning = []
                modelQuery.limit = nil
                var changes = ReferenceKeychain.Changes()
                var itemChanges = ItemChanges()
                switch Int.random(in: 0..<4, using: &random) {
                case 0:
                    changes.account = Self.accounts.randomElement(using: &random)!
                    itemChanges.attributes[.account] = .string(changes.account!)
                case 1:
                    changes.protection = ProtectionClass.allCases.randomElement(using: &random)!
                    itemChanges.protection = changes.protection
                case 2:
                    changes.label = "label\(step)"
                    itemChanges.attributes[.label] = .string(changes.label!)
                default:
                    changes.data = Data("u\(step)".utf8)
                    itemChanges.data = changes.data
                }
                let expected = model.update(modelQuery, changes)
                let actual = status { try keychain.update(query, with: itemChanges) }
                #expect(actual == expected, "update: \(context)")
                seen[expected, default: 0] += 1
            case 70..<80:
                var (modelQuery, query) = randomQuery(limit: false)
                query.matchLimit = nil
                query.returning = []
                modelQuery.limit = nil
                let expected = model.delete(modelQuery)
                let actual = status { try keychain.delete(query) }
                #expect(actual == expected, "delete: \(context)")
                seen[expected, default: 0] += 1
            case 80..<85:
                try t.device.lock(immediately: true)
                if case .unlocked = model.state { model.state = .locked(keysUntil: model.now) }
            case 85..<90:
                try t.device.lock()
                if case .unlocked = model.state { model.state = .locked(keysUntil: model.now + model.grace) }
            case 90..<94:
                let seconds = Double(Int.random(in: 1...8, using: &random))
                t.clock.advance(by: seconds)
                model.now += seconds
            case 94..<98:
                try t.device.unlock(passcode: TestDevice.defaultPasscode)
                model.state = .unlocked
            default:
                try t.device.reboot()
                model.state = .beforeFirstUnlock
            }
        }
        // The run must have reached the interesting outcomes, or it proves little.
        for outcome in [KeychainStatus.success, .itemNotFound, .duplicateItem, .interactionNotAllowed] {
            #expect(seen[outcome, default: 0] > 0, "seed \(seed) never produced \(outcome)")
        }
    }
}
