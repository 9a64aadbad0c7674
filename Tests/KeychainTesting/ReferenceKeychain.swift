public import Foundation
public import KeychainModel
public import KeychainStore

/// A plaintext model of the keychain rules, small enough to check by eye: a list of generic
/// passwords in insertion order and the lock state. The engine must agree with it on every
/// status and every returned secret.
public struct ReferenceKeychain {
    public struct Item: Equatable {
        public var account: String
        public var service: String
        public var synchronizable: Bool
        public var protection: ProtectionClass
        public var label: String?
        public var data: Data
    }

    /// Locked: class A keys stay until `keysUntil` (the end of the grace period).
    public enum State { case beforeFirstUnlock, unlocked, locked(keysUntil: Double) }

    public var items: [Item] = []
    public var state: State = .unlocked
    public var now: Double = 0
    public let grace: Double

    public init(grace: Double) { self.grace = grace }

    public func available(_ protection: ProtectionClass) -> Bool {
        switch (protection.availability, state) {
        case (.always, _): true
        case (.afterFirstUnlock, .beforeFirstUnlock): false
        case (.afterFirstUnlock, _): true
        case (.whenUnlocked, .unlocked): true
        case (.whenUnlocked, .locked(let keysUntil)): now < keysUntil
        case (.whenUnlocked, .beforeFirstUnlock): false
        }
    }

    public struct Query {
        public var account: String?
        public var service: String?
        public var synchronizable: SynchronizableMatch
        public var protection: ProtectionClass?
        public var limit: Int?
    }

    public func matches(_ query: Query) -> [Int] {
        var found = [Int]()
        for (index, item) in items.enumerated() {
            guard query.account.map({ $0 == item.account }) ?? true, query.service.map({ $0 == item.service }) ?? true,
                query.synchronizable.values.contains(item.synchronizable),
                query.protection.map({ $0 == item.protection }) ?? true
            else { continue }
            found.append(index)
            if let limit = query.limit, found.count >= limit { break }
        }
        return found
    }

    public func samePrimaryKey(_ a: Item, _ b: Item) -> Bool {
        a.account == b.account && a.service == b.service && a.synchronizable == b.synchronizable
    }

    public mutating func add(_ item: Item) -> KeychainStatus {
        guard available(item.protection) else { return .interactionNotAllowed }
        guard !items.contains(where: { samePrimaryKey($0, item) }) else { return .duplicateItem }
        items.append(item)
        return .success
    }

    public func copy(_ query: Query) -> (KeychainStatus, [Data]) {
        let found = matches(query)
        guard !found.isEmpty else { return (.itemNotFound, []) }
        guard found.allSatisfy({ available(items[$0].protection) }) else { return (.interactionNotAllowed, []) }
        return (.success, found.map { items[$0].data })
    }

    public struct Changes {
        public var account: String?
        public var protection: ProtectionClass?
        public var label: String?
        public var data: Data?
    }

    public mutating func update(_ query: Query, _ changes: Changes) -> KeychainStatus {
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

    public mutating func delete(_ query: Query) -> KeychainStatus {
        let found = Set(matches(query))
        guard !found.isEmpty else { return .itemNotFound }
        items = items.enumerated().filter { !found.contains($0.offset) }.map(\.element)
        return .success
    }
}

/// A keychain API under test: the typed one, or Keychain Services' dictionaries.
public protocol KeychainUnderTest {
    func add(_ item: ReferenceKeychain.Item) -> KeychainStatus
    func copy(_ query: ReferenceKeychain.Query) -> (KeychainStatus, [Data])
    func update(_ query: ReferenceKeychain.Query, _ changes: ReferenceKeychain.Changes) -> KeychainStatus
    func delete(_ query: ReferenceKeychain.Query) -> KeychainStatus
}

/// The typed API of `Keychain`.
public struct TypedKeychain: KeychainUnderTest {
    let keychain: Keychain

    public init(_ keychain: Keychain) { self.keychain = keychain }

    public func add(_ item: ReferenceKeychain.Item) -> KeychainStatus {
        status {
            try keychain.add(
                NewItem(
                    .genericPassword, attributes: [.account: .string(item.account), .service: .string(item.service)],
                    data: item.data, protection: item.protection, synchronizable: item.synchronizable))
        }
    }

    public func copy(_ query: ReferenceKeychain.Query) -> (KeychainStatus, [Data]) {
        var data: [Data] = []
        let result = status { data = try keychain.copy(Self.itemQuery(query, returning: .data)).compactMap(\.data) }
        return (result, data)
    }

    public func update(_ query: ReferenceKeychain.Query, _ changes: ReferenceKeychain.Changes) -> KeychainStatus {
        var itemChanges = ItemChanges()
        if let account = changes.account { itemChanges.attributes[.account] = .string(account) }
        if let label = changes.label { itemChanges.attributes[.label] = .string(label) }
        itemChanges.protection = changes.protection
        itemChanges.data = changes.data
        return status { try keychain.update(Self.itemQuery(query, returning: []), with: itemChanges) }
    }

    public func delete(_ query: ReferenceKeychain.Query) -> KeychainStatus {
        status { try keychain.delete(Self.itemQuery(query, returning: [])) }
    }

    static func itemQuery(_ query: ReferenceKeychain.Query, returning: ReturnOptions) -> ItemQuery {
        var attributes = Attributes()
        if let account = query.account { attributes[.account] = .string(account) }
        if let service = query.service { attributes[.service] = .string(service) }
        return ItemQuery(
            .genericPassword, attributes: attributes, protection: query.protection, synchronizable: query.synchronizable,
            matchLimit: query.limit == 1 ? .one : returning.isEmpty ? nil : .all, returning: returning)
    }
}

/// One seeded random sequence of adds, copies, updates, deletes, locks, clock moves, unlocks
/// and reboots, run on a device through an API and on the model side by side.
public struct ReferenceRun {
    /// Each call's step, operation, status and returned secrets, the same for every API.
    public var trace: [String] = []
    /// Where the API and the model disagreed.
    public var disagreements: [String] = []
    /// How often each status came up: a run that never met a status proves little about it.
    public var seen: [KeychainStatus: Int] = [:]

    static let accounts = ["alice", "bob", "carol"]
    static let services = ["mail", "chat"]

    public init(seed: UInt64, steps: Int = 250, device t: TestDevice, through api: some KeychainUnderTest) throws {
        var random = SeededGenerator(seed: seed)
        var model = ReferenceKeychain(grace: 10)

        func randomQuery(limit: Bool) -> ReferenceKeychain.Query {
            let account = Bool.random(using: &random) ? Self.accounts.randomElement(using: &random) : nil
            let service = Bool.random(using: &random) ? Self.services.randomElement(using: &random) : nil
            let sync = [SynchronizableMatch.no, .yes, .any].randomElement(using: &random)!
            // A rare accessibility filter reproduces the phantom mismatch along the way.
            let protection = Int.random(in: 0..<8, using: &random) == 0 ? ProtectionClass.allCases.randomElement(using: &random) : nil
            let limit = limit ? [1, nil].randomElement(using: &random)! : nil
            return ReferenceKeychain.Query(account: account, service: service, synchronizable: sync, protection: protection, limit: limit)
        }

        func compare(
            _ operation: String, _ step: Int, _ actual: KeychainStatus, _ expected: KeychainStatus,
            data: [Data] = [], expectedData: [Data] = []
        ) {
            trace.append("\(step) \(operation) \(actual.name) \(data.map { String(decoding: $0, as: UTF8.self) })")
            seen[expected, default: 0] += 1
            if actual != expected || data != expectedData {
                disagreements.append(
                    "seed \(seed) step \(step) \(operation): \(actual.name) \(data.count) secret(s), the model says \(expected.name) \(expectedData.count)")
            }
        }

        for step in 0..<steps {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                let item = ReferenceKeychain.Item(
                    account: Self.accounts.randomElement(using: &random)!, service: Self.services.randomElement(using: &random)!,
                    synchronizable: Bool.random(using: &random), protection: ProtectionClass.allCases.randomElement(using: &random)!,
                    label: nil, data: Data("v\(step)".utf8))
                compare("add", step, api.add(item), model.add(item))
            case 30..<55:
                let query = randomQuery(limit: true)
                let (expected, expectedData) = model.copy(query)
                let (actual, data) = api.copy(query)
                compare("copy", step, actual, expected, data: data, expectedData: expectedData)
            case 55..<70:
                let query = randomQuery(limit: false)
                var changes = ReferenceKeychain.Changes()
                switch Int.random(in: 0..<4, using: &random) {
                case 0: changes.account = Self.accounts.randomElement(using: &random)!
                case 1: changes.protection = ProtectionClass.allCases.randomElement(using: &random)!
                case 2: changes.label = "label\(step)"
                default: changes.data = Data("u\(step)".utf8)
                }
                compare("update", step, api.update(query, changes), model.update(query, changes))
            case 70..<80:
                let query = randomQuery(limit: false)
                compare("delete", step, api.delete(query), model.delete(query))
            case 80..<85:
                try t.device.lock(immediately: true)
                // Locking at once ends a grace period still running, as the side button does.
                switch model.state {
                case .unlocked: model.state = .locked(keysUntil: model.now)
                case .locked(let keysUntil): model.state = .locked(keysUntil: min(keysUntil, model.now))
                case .beforeFirstUnlock: break
                }
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
    }
}
