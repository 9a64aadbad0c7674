import Foundation
import GRDB
public import KeychainModel
import KeyferryCrypto
import KeyferryThreads

/// The SecItem engine as one app (or the device itself) sees it. Every call follows Apple's
/// semantics and fails with Apple's status in a `KeychainError`.
public struct Keychain: Sendable {
    enum Scope: Sendable {
        /// An app: exactly its entitled groups, in entitlement order.
        case groups([String])
        /// The device's own view, every group: listing, export, tools.
        case device
    }

    let device: Device
    let scope: Scope
    /// Keyed hashes of the entitled groups, computed once per keychain rather than per call.
    private let groupHashes: [String: [UInt8]]
    /// On a Mac, the group of the app's file-based keychain, where calls may go instead of (or
    /// as well as) the data protection keychain this one is (Keychain+Mac.swift).
    let fileBasedGroup: String?

    init(device: Device, scope: Scope, fileBasedGroup: String? = nil) {
        var hashes: [String: [UInt8]] = [:]
        if case .groups(let groups) = scope {
            hashes = Dictionary(groups.map { ($0, device.index.accessGroupHash($0)) }, uniquingKeysWith: { a, _ in a })
        }
        self.init(device: device, scope: scope, groupHashes: hashes, fileBasedGroup: fileBasedGroup)
    }

    init(device: Device, scope: Scope, groupHashes: [String: [UInt8]], fileBasedGroup: String? = nil) {
        self.device = device
        self.scope = scope
        self.groupHashes = groupHashes
        self.fileBasedGroup = fileBasedGroup
    }

    /// The hashes this keychain computed, for the next keychain of the same app.
    var scopeAndHashes: (Scope, [String: [UInt8]]) { (scope, groupHashes) }

    private var index: ItemIndex { device.index }

    func accessGroupHash(_ group: String) -> [UInt8] { groupHashes[group] ?? index.accessGroupHash(group) }

    // MARK: SecItemAdd

    /// Adds one item. Fails with `errSecDuplicateItem` when its primary key is taken.
    @discardableResult
    public func add(_ item: NewItem) throws -> ItemRecord {
        if let fileBased = fileBasedKeychain(for: item) { return try fileBased.add(item.forFileBasedKeychain) }
        let prepared = try prepare(item, keys: try device.availableKeys())
        try device.database.write { db in try insert(prepared, db) }
        return prepared.record
    }

    /// Adds many items in one transaction: the bulk path for imports and restores (on a Mac,
    /// to the data protection keychain, whatever the items say). All or
    /// nothing: one duplicate fails the whole batch. Items are sealed on every core, a batch
    /// ahead of the inserts, which keep the order given.
    public func importItems(_ items: [NewItem]) throws {
        let keys = try device.availableKeys()
        let batchSize = 4_096
        func sealing(from start: Int) -> BackgroundWork<[PreparedRow]> {
            let batch = Array(items[start..<min(start + batchSize, items.count)])
            return BackgroundWork { [self] in try ParallelMap.map(batch) { try prepare($0, keys: keys) } }
        }
        try device.database.write { db in
            var next = items.isEmpty ? nil : sealing(from: 0)
            // Whatever happens, no sealing outlives the call.
            defer { _ = try? next?.result() }
            for start in stride(from: 0, to: items.count, by: batchSize) {
                guard let work = next else { break }
                next = nil
                let rows = try work.result()
                if start + batchSize < items.count { next = sealing(from: start + batchSize) }
                for row in rows { try insert(row, db) }
            }
        }
    }

    /// Add, or on `errSecDuplicateItem` update the existing item's data and attributes: the
    /// pattern every keychain wrapper writes by hand.
    public func addOrUpdate(_ item: NewItem) throws {
        if let fileBased = fileBasedKeychain(for: item) { return try fileBased.addOrUpdate(item.forFileBasedKeychain) }
        do {
            try add(item)
        } catch let error as KeychainError where error.status == .duplicateItem {
            let primaryKey = Dictionary(
                uniqueKeysWithValues: item.itemClass.primaryKey.map {
                    ($0, item.attributes[$0] ?? .empty(of: $0.kind!))
                })
            // The item the add collided with: same key in the group the add went to, no other.
            let query = ItemQuery(
                item.itemClass, attributes: primaryKey, accessGroup: try groupForWriting(item.accessGroup),
                synchronizable: item.synchronizable ? .yes : .no)
            try update(
                query,
                with: ItemChanges(
                    attributes: item.attributes, protection: item.accessControl == nil ? item.protection : nil, data: item.data))
        }
    }

    private struct PreparedRow: Sendable {
        var sealed: SealedRow
        var record: ItemRecord
    }

    private func prepare(_ item: NewItem, keys: [ProtectionClass: ClassKeys]) throws -> PreparedRow {
        guard item.itemClass != .identity else {
            throw KeychainError(.param, "an identity is a certificate plus its private key; add those two items (Keychain.addIdentity).")
        }
        try item.itemClass.validate(item.attributes)
        try NewItem.checkSize(of: item.data)
        if let accessControl = item.accessControl, let protection = item.protection, protection != accessControl.protection {
            throw KeychainError(.param, "give the accessibility inside the access control only, not both.")
        }
        let protection = item.accessControl?.protection ?? item.protection ?? item.itemClass.defaultProtection
        try checkSynchronizable(item.synchronizable, item.accessControl)
        if item.synchronizable, item.attributes[.tokenID] != nil { throw Self.secureEnclaveSync }
        let group = try groupForWriting(item.accessGroup)
        try checkPasscode(for: protection)
        guard let classKeys = keys[protection] else { throw unavailable(protection) }
        let now = device.clock.now()
        let binding =
            item.accessControl?.flags.contains(.biometryCurrentSet) == true
            ? (try device.database.unsafeRead(device.biometryEnrollment) ?? []) : []
        let attributes = item.itemClass.withPrimaryKeyDefaults(item.attributes)
        let metadata = ItemMetadata(
            accessGroup: group, accessControl: item.accessControl, biometryBinding: binding,
            creationDate: now, modificationDate: now, attributes: attributes)
        let random = device.entropy.bytes(16 + SealedRow.entropyPerRow)
        let header = header(
            uuid: UUIDBytes.uuid(Array(random[0..<16])), itemClass: item.itemClass, protection: protection,
            synchronizable: item.synchronizable, metadata: metadata)
        let sealed = SealedRow.seal(header: header, metadata: metadata, secret: item.data, keys: classKeys, random: Array(random[16...]))
        return PreparedRow(sealed: sealed, record: record(header, metadata, data: item.returning.contains(.data) ? item.data : nil))
    }

    private func insert(_ row: PreparedRow, _ db: Database) throws {
        guard try ItemTable.insert(db, row.sealed, changeSequence: device.database.nextChangeSequence()) else {
            throw duplicate(row.record)
        }
    }

    func header(uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool, metadata: ItemMetadata) -> RowHeader {
        header(
            uuid: uuid, itemClass: itemClass, protection: protection, synchronizable: synchronizable, accessGroup: metadata.accessGroup,
            attributes: metadata.attributes)
    }

    /// The plaintext columns of a row: its keyed hashes are this device's own.
    func header(
        uuid: UUID, itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool, accessGroup: String, attributes: Attributes
    ) -> RowHeader {
        let primaryKey = PrimaryKey(itemClass: itemClass, accessGroup: accessGroup, synchronizable: synchronizable, attributes: attributes)
        return RowHeader(
            uuid: uuid, itemClass: itemClass, protection: protection, synchronizable: synchronizable,
            accessGroupHash: accessGroupHash(accessGroup), primaryKeyHash: index.primaryKeyHash(primaryKey),
            tokens: index.tokens(itemClass, attributes))
    }

    // MARK: SecItemCopyMatching

    /// The matching items, at most `matchLimit` (default one). None is `errSecItemNotFound`.
    /// A damaged row is passed over for the next match; one that was all there was fails
    /// with `errSecDecode`.
    public func copy(_ query: ItemQuery) throws -> [ItemRecord] {
        var damaged: [DamagedItem] = []
        return try copy(query, damaged: &damaged)
    }

    /// As `copy(_:)`, naming in `damaged` the matching rows passed over because they fail
    /// authentication: what a list or a search for all reports beside what it found.
    public func copy(_ query: ItemQuery, damaged: inout [DamagedItem]) throws -> [ItemRecord] {
        // One answer unless the call asked for an array; then both, folded.
        let array = query.matchLimit.map { $0.maximum != 1 } ?? false
        if let answer = try onMacKeychains(query, changing: false, { try $0.copy($2) }, merge: array ? (+) : { a, _ in a }) { return answer }
        defer { try? device.saveAttempts() }
        if query.itemClass == .identity { return try identities(query).map(\.identity) }
        if query.returning.contains(.ref) {
            throw KeychainError(
                .unimplemented,
                "kSecReturnRef: the store returns no objects; ask for data or attributes (KeyferrySecurity makes SecKey and SecCertificate refs of them).")
        }
        let limit = query.matchLimit ?? .one
        let keys = try device.availableKeys()
        let withData = query.returning.contains(.data)
        let skipping = withData && query.authentication.skipsItemsNeedingAuthentication
        let (records, passedOver) = try device.database.unsafeRead { db in
            // Items may be left out, so the limit applies to what is kept: the rows past it are
            // read only when some were left out.
            var readsAll = skipping || limit.maximum == nil
            var rows = try find(query, db, limit: readsAll ? nil : limit.maximum)
            var records: [ItemRecord] = []
            var passedOver: [(item: DamagedItem, error: KeychainError)] = []
            var index = 0
            while records.count < limit.maximum ?? .max {
                if index == rows.count {
                    // A limited read cut short by rows left out reads on past them.
                    guard !readsAll, rows.count == limit.maximum else { break }
                    readsAll = true
                    rows = try find(query, db, limit: nil)
                    continue
                }
                let row = rows[index]
                index += 1
                do {
                    records.append(try open(row, keys: keys, withData: withData, authentication: query.authentication, db))
                } catch let error as KeychainError where skipping && error.status == .interactionNotAllowed && keys[row.header.protection] != nil {
                    continue  // Its class key is there, so its access control asked for a prompt.
                } catch let error as KeychainError where error.status == .decode {
                    passedOver.append((damagedItem(row, error), error))
                }
            }
            return (records, passedOver)
        }
        damaged += passedOver.map(\.item)
        guard !records.isEmpty else { throw passedOver.first?.error ?? notFound(query) }
        return records
    }

    /// Opens a row into a record: metadata always, the secret when asked (after access control).
    func open(
        _ row: StoredRow, keys: [ProtectionClass: ClassKeys], withData: Bool, authentication: AuthenticationContext,
        _ db: Database
    ) throws -> ItemRecord {
        let (metadata, opener) = try openMetadata(row, keys: keys)
        var data: Data?
        if withData {
            try authenticate(metadata, authentication, db)
            data = try openSecret(row, opener)
        }
        return record(row.header, metadata, data: data)
    }

    /// Opens a row for the system itself, which no access control asks: no database needed.
    func open(_ row: StoredRow, keys: [ProtectionClass: ClassKeys], withData: Bool) throws -> ItemRecord {
        let (metadata, opener) = try openMetadata(row, keys: keys)
        return record(row.header, metadata, data: withData ? try openSecret(row, opener) : nil)
    }

    /// An item as calls return it: the row's plaintext columns plus its opened metadata.
    func record(_ header: RowHeader, _ metadata: ItemMetadata, data: Data?) -> ItemRecord {
        ItemRecord(
            itemClass: header.itemClass, uuid: header.uuid, accessGroup: metadata.accessGroup, protection: header.protection,
            synchronizable: header.synchronizable, accessControl: metadata.accessControl, creationDate: metadata.creationDate,
            modificationDate: metadata.modificationDate, attributes: metadata.attributes, data: data)
    }

    /// The row's metadata, and what opens its secret after.
    func openMetadata(_ row: StoredRow, keys: [ProtectionClass: ClassKeys]) throws -> (ItemMetadata, SealedRow.Opener) {
        guard let classKeys = keys[row.header.protection] else { throw unavailable(row.header.protection) }
        do {
            let opener = try row.sealed.opener(classKeys)
            return (try opener.metadata(), opener)
        } catch {
            throw corrupt(row, "attributes")
        }
    }

    func openSecret(_ row: StoredRow, _ opener: SealedRow.Opener) throws -> Data {
        do {
            return try opener.secret()
        } catch {
            throw corrupt(row, "secret")
        }
    }

    private func authenticate(_ metadata: ItemMetadata, _ context: AuthenticationContext, _ db: Database) throws {
        guard let accessControl = metadata.accessControl, accessControl.requiresAuthentication else { return }
        let enrollment = try device.biometryEnrollment(db)
        let facts = AuthenticationFacts(
            biometryEnrolled: enrollment != nil,
            biometryUnchangedSinceItemWasAdded: enrollment.map { $0 == metadata.biometryBinding } ?? false,
            isCorrectPasscode: { device.isCorrectPasscode($0, db) })
        if let failure = accessControl.evaluate(context, facts: facts) { throw failure }
    }

    // MARK: Finding rows

    /// The live rows a query matches, in insertion order, found through keyed hashes only: no
    /// key is needed, so delete works in every lock state.
    private func find(_ query: ItemQuery, _ db: Database, limit: Int?) throws -> [StoredRow] {
        try query.itemClass.validate(query.attributes)
        var filter = ItemTable.Filter(itemClass: query.itemClass, synchronizable: query.synchronizable.values)
        let groups = try groupsForReading(query.accessGroup)
        filter.accessGroupHashes = groups?.map(accessGroupHash)
        let primaryKey = query.itemClass.primaryKey
        if let groups, !primaryKey.isEmpty, primaryKey.allSatisfy({ query.attributes[$0] != nil }) {
            filter.primaryKeyHashes = groups.flatMap { group in
                query.synchronizable.values.map { sync in
                    index.primaryKeyHash(PrimaryKey(itemClass: query.itemClass, accessGroup: group, synchronizable: sync, attributes: query.attributes))
                }
            }
        }
        filter.protection = query.protection
        if let reference = query.persistentReference {
            guard reference.itemClass == query.itemClass else { return [] }
            filter.uuid = reference.uuid
        }
        // Attributes the primary-key hash already pins need no token of their own.
        let pinned = filter.primaryKeyHashes == nil ? [] : primaryKey
        for (key, value) in query.attributes where !pinned.contains(key) {
            filter.tokens.append(index.token(query.itemClass, key, value))
        }
        filter.limit = limit
        return try ItemTable.rows(db, filter)
    }

    /// The groups a search may see: the app's entitled groups, or just the one it names.
    func groupsForReading(_ requested: String?) throws -> [String]? {
        switch scope {
        case .device:
            return requested.map { [$0] }
        case .groups(let entitled):
            guard !entitled.isEmpty else { throw noEntitlement() }
            guard let requested else { return entitled }
            guard entitled.contains(requested) else { throw notEntitled(requested) }
            return [requested]
        }
    }

    /// Where a new or moved item goes: the named group if entitled, else the first entitled one.
    func groupForWriting(_ requested: String?) throws -> String {
        switch scope {
        case .device:
            guard let requested else { throw KeychainError(.param, "the device's own keychain view needs an explicit access group to add to.") }
            return requested
        case .groups(let entitled):
            guard let first = entitled.first else { throw noEntitlement() }
            guard let requested else { return first }
            guard entitled.contains(requested) else { throw notEntitled(requested) }
            return requested
        }
    }

    /// Apple refuses access-control constraints on an item that would leave the device.
    private static let secureEnclaveSync = KeychainError(
        .param, "a Secure Enclave key cannot be synchronizable: it never leaves the device it was made on.")

    private func checkSynchronizable(_ synchronizable: Bool, _ accessControl: AccessControl?) throws {
        if synchronizable, let accessControl, accessControl.requiresAuthentication {
            throw KeychainError(.param, "a synchronizable item cannot have access control constraints (\(accessControl.expression)).")
        }
    }

    /// `whenPasscodeSetThisDeviceOnly` exists only while the device has a passcode (or, as the
    /// Simulator, says it has one).
    func checkPasscode(for protection: ProtectionClass) throws {
        if protection == .whenPasscodeSetThisDeviceOnly, !device.info.profile.reportsPasscodeSet, !(try device.passcodeIsSet()) {
            throw KeychainError(.authFailed, "whenPasscodeSetThisDeviceOnly items need a device passcode, and this device has none.")
        }
    }

    // MARK: SecItemUpdate

    /// Applies `changes` to every match, in one transaction: all change or none. A match limit
    /// in the query takes the first matches in the order they were added, as Apple's server
    /// selects them (`LIMIT` on its query). Primary-key
    /// attributes may change (Apple's behaviour); a collision is `errSecDuplicateItem`. Empty
    /// changes are not refused (Apple does not check them): they touch every match, whose
    /// modification date moves on. The query's return options are not used (`SecItemUpdate`
    /// refuses them in its dictionary). Returns how many items changed.
    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemChanges) throws -> Int {
        let onMac = try onMacKeychains(
            query, changing: true,
            { keychain, target, query in
                guard target == .fileBased else { return try keychain.update(query, with: changes) }
                if changes.synchronizable == true { return try moveToDataProtection(query, with: changes, from: keychain) }
                return try keychain.update(query, with: changes.forFileBasedKeychain)
            }, merge: (+))
        if let onMac { return onMac }
        guard query.itemClass != .identity else {
            throw KeychainError(.unimplemented, "update the certificate and the private key of an identity separately.")
        }
        defer { try? device.saveAttempts() }
        try query.itemClass.validate(changes.attributes)
        if let data = changes.data { try NewItem.checkSize(of: data) }
        if let group = changes.accessGroup { _ = try groupForWriting(group) }
        if let protection = changes.protection { try checkPasscode(for: protection) }
        let keys = try device.availableKeys()
        let now = device.clock.now()
        return try device.database.write { db in
            let rows = try find(query, db, limit: query.matchLimit?.maximum)
            guard !rows.isEmpty else { throw notFound(query) }
            var written = Set<[UInt8]>()
            for row in rows {
                let (metadata, opener) = try openMetadata(row, keys: keys)
                try authenticate(metadata, query.authentication, db)
                let secret = try changes.data ?? openSecret(row, opener)
                let protection = changes.protection ?? row.header.protection
                guard let newKeys = keys[protection] else { throw unavailable(protection) }
                let synchronizable = changes.synchronizable ?? row.header.synchronizable
                try checkSynchronizable(synchronizable, metadata.accessControl)
                if synchronizable, metadata.attributes[.tokenID] != nil { throw Self.secureEnclaveSync }
                var updated = metadata
                updated.accessGroup = changes.accessGroup ?? metadata.accessGroup
                updated.attributes.merge(changes.attributes) { $1 }
                updated.accessControl = try metadata.accessControl.map { try AccessControl(protection: protection, flags: $0.flags) }
                // Strictly increasing, even when the clock has not moved since the last write.
                updated.modificationDate = max(now, metadata.modificationDate.addingTimeInterval(0.001))
                // Made local: for the other devices a deletion, so the synchronizable item leaves
                // a tombstone, and the local copy goes on as a new item.
                let madeLocal = row.header.synchronizable && !synchronizable
                let header = header(
                    uuid: madeLocal ? UUIDBytes.uuid(device.entropy.bytes(16)) : row.header.uuid, itemClass: row.header.itemClass,
                    protection: protection, synchronizable: synchronizable, metadata: updated)
                if header.primaryKeyHash != row.header.primaryKeyHash {
                    if let holder = try ItemTable.holder(db, primaryKeyHash: header.primaryKeyHash) {
                        guard holder.isTombstone else {
                            throw KeychainError(.duplicateItem, "the update would give an item the primary key of another item; nothing was changed.")
                        }
                        try device.database.saveChangeCounter(db)
                        try ItemTable.delete(db, id: holder.id)
                    }
                }
                guard written.insert(header.primaryKeyHash).inserted else {
                    throw KeychainError(.duplicateItem, "the update would give two matched items the same primary key; nothing was changed.")
                }
                let sealed = SealedRow.seal(
                    header: header, metadata: updated, secret: secret, keys: newKeys,
                    random: device.entropy.bytes(SealedRow.entropyPerRow))
                if madeLocal {
                    try ItemTable.bury(db, id: row.id, at: updated.modificationDate, changeSequence: device.database.nextChangeSequence())
                    _ = try ItemTable.insert(db, sealed, changeSequence: device.database.nextChangeSequence())
                } else {
                    try ItemTable.replace(db, id: row.id, with: sealed, changeSequence: device.database.nextChangeSequence())
                }
            }
            return rows.count
        }
    }

    // MARK: SecItemDelete

    /// Deletes every match. Needs no class key, so it succeeds while locked: the trap behind
    /// "delete on read failure". Synchronizable items leave a tombstone for sync. Returns how
    /// many items went (an identity counts as one).
    @discardableResult
    public func delete(_ query: ItemQuery) throws -> Int {
        let onMac = try onMacKeychains(
            query, changing: true,
            { keychain, target, query in
                target == .fileBased ? try keychain.deleteMatches(query) : try keychain.delete(query)
            }, merge: (+))
        if let onMac { return onMac }
        // Apple's server takes kSecMatchLimitAll, which says what a delete does anyway.
        guard query.matchLimit == nil || query.matchLimit == .all else {
            throw KeychainError(.param, "SecItemDelete deletes every match; kSecMatchLimit may only be kSecMatchLimitAll there.")
        }
        return try deleteMatches(query)
    }

    /// Deletes the matches, up to the query's limit.
    func deleteMatches(_ query: ItemQuery) throws -> Int {
        guard query.returning.isEmpty else { throw KeychainError(.param, "SecItemDelete returns nothing; remove the kSecReturn keys.") }
        if query.itemClass == .identity {
            var pairQuery = query
            pairQuery.matchLimit = query.matchLimit ?? .all
            let pairs = try identities(pairQuery)
            try device.database.write { db in
                for pair in pairs {
                    for part in [pair.certificate, pair.key] {
                        try bury(
                            try find(
                                ItemQuery(
                                    part.itemClass, accessGroup: part.accessGroup, synchronizable: .any,
                                    persistentReference: part.persistentReference), db, limit: 1), db, keys: [:])
                    }
                }
            }
            return pairs.count
        }
        let keys = try device.availableKeys()
        return try device.database.write { db in
            let rows = try find(query, db, limit: query.matchLimit?.maximum)
            guard !rows.isEmpty else { throw notFound(query) }
            try bury(rows, db, keys: keys)
            return rows.count
        }
    }

    private func bury(_ rows: [StoredRow], _ db: Database, keys: [ProtectionClass: ClassKeys]) throws {
        let now = device.clock.now()
        try device.database.saveChangeCounter(db)
        for row in rows {
            guard row.header.synchronizable else {
                try ItemTable.delete(db, id: row.id)
                continue
            }
            // The tombstone must be younger than the item; the item's date is readable only
            // while its class key is in memory.
            let modified = (try? openMetadata(row, keys: keys))?.0.modificationDate
            let date = modified.map { max(now, $0.addingTimeInterval(0.001)) } ?? now
            try ItemTable.bury(db, id: row.id, at: date, changeSequence: device.database.nextChangeSequence())
        }
    }

    // MARK: Errors with a sentence

    func unavailable(_ protection: ProtectionClass) -> KeychainError {
        let when = (try? device.withPower { $0.state }) == .beforeFirstUnlock ? "before the device's first unlock" : "while the device is locked"
        return KeychainError(
            .interactionNotAllowed,
            "the item is \(protection.name) and its class key is not available \(when); do not treat this as a missing item, retry after unlock.")
    }

    private func notFound(_ query: ItemQuery) -> KeychainError {
        KeychainError(.itemNotFound, "no \(query.itemClass.name) item matches the query.")
    }

    private func duplicate(_ record: ItemRecord) -> KeychainError {
        KeychainError(
            .duplicateItem,
            "a \(record.itemClass.name) item with the same primary key already exists in \(record.accessGroup); update it instead, or delete it first.")
    }

    /// A row that failed authentication (`corrupt`), as the reads of many items name it.
    func damagedItem(_ row: StoredRow, _ error: KeychainError) -> DamagedItem {
        DamagedItem(
            uuid: row.header.uuid, itemClass: row.header.itemClass, protection: row.header.protection, synchronizable: row.header.synchronizable,
            problem: error.message)
    }

    func corrupt(_ row: StoredRow, _ part: String) -> KeychainError {
        KeychainError(
            .decode, "the \(part) of item \(row.header.uuid) failed authentication; the database was damaged or edited, and nothing from the item was returned."
        )
    }

    private func noEntitlement() -> KeychainError {
        KeychainError(.missingEntitlement, "the app has no keychain entitlement; sign it with a team so it gets its application identifier group.")
    }

    private func notEntitled(_ group: String) -> KeychainError {
        KeychainError(.missingEntitlement, "the app is not entitled to access group '\(group)'; add it to keychain-access-groups.")
    }
}

// MARK: Identities

extension Keychain {
    struct IdentityPair {
        var certificate: ItemRecord
        var key: ItemRecord
        /// The identity as a call returns it: the certificate's attributes over the key's.
        var identity: ItemRecord {
            var record = certificate
            record.itemClass = .identity
            record.attributes = key.attributes.merging(certificate.attributes) { $1 }
            return record
        }
    }

    /// Certificates paired with the private key whose application label is their public key hash.
    func identities(_ query: ItemQuery) throws -> [IdentityPair] {
        try ItemClass.identity.validate(query.attributes)
        let certificateAttributes = ItemClass.certificate.attributes
        var certificates = query
        certificates.itemClass = .certificate
        certificates.attributes = query.attributes.filter { certificateAttributes.contains($0.key) }
        certificates.matchLimit = .all
        certificates.persistentReference = query.persistentReference.map { PersistentReference(itemClass: .certificate, uuid: $0.uuid) }
        var privateKeys = ItemQuery(
            .key, attributes: query.attributes.filter { !certificateAttributes.contains($0.key) },
            accessGroup: query.accessGroup, synchronizable: query.synchronizable, matchLimit: .all)
        privateKeys.attributes[.keyClass] = .number(1)
        let certs = try copyOrEmpty(certificates)
        let keys = certs.isEmpty ? [] : try copyOrEmpty(privateKeys)
        var pairs = [IdentityPair]()
        for cert in certs {
            guard let hash = cert.attributes[.publicKeyHash],
                let key = keys.first(where: { $0.attributes[.applicationLabel] == hash && $0.accessGroup == cert.accessGroup })
            else { continue }
            pairs.append(IdentityPair(certificate: cert, key: key))
            if let limit = (query.matchLimit ?? .one).maximum, pairs.count >= limit { break }
        }
        guard !pairs.isEmpty else { throw KeychainError(.itemNotFound, "no identity (certificate with its private key) matches the query.") }
        return pairs
    }

    private func copyOrEmpty(_ query: ItemQuery) throws -> [ItemRecord] {
        do {
            return try copy(query)
        } catch let error as KeychainError where error.status == .itemNotFound {
            return []
        }
    }

    /// Adds a certificate and its private key in one transaction; together they are an identity.
    public func addIdentity(certificate: NewItem, privateKey: NewItem) throws {
        if let fileBased = fileBasedKeychain(for: certificate) {
            return try fileBased.addIdentity(certificate: certificate.forFileBasedKeychain, privateKey: privateKey.forFileBasedKeychain)
        }
        guard certificate.itemClass == .certificate, privateKey.itemClass == .key else {
            throw KeychainError(.param, "an identity is a certificate item plus a key item.")
        }
        guard let hash = certificate.attributes[.publicKeyHash], privateKey.attributes[.applicationLabel] == hash,
            privateKey.attributes[.keyClass] == .number(1)
        else {
            throw KeychainError(
                .param,
                "the private key's kSecAttrApplicationLabel must equal the certificate's kSecAttrPublicKeyHash, and its kSecAttrKeyClass must be private (1).")
        }
        try importItems([certificate, privateKey])
    }
}
