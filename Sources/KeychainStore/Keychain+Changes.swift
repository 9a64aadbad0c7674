public import Foundation
import GRDB
public import KeychainModel
import KeyferryThreads

/// A live item as the system exports it for a backup: its attributes left in the byte coding
/// the row holds them in, and its secret opened or still sealed, as the export asked.
package struct ExportedItem: Sendable {
    public var uuid: UUID
    public var itemClass: ItemClass
    public var protection: ProtectionClass
    public var synchronizable: Bool
    public var accessGroup: String
    public var accessControl: AccessControl?
    public var creationDate: Date
    public var modificationDate: Date
    public var attributes: EncodedAttributes
    public var secret: Secret

    public enum Secret: Sendable {
        /// Opened: for a format that seals it its own way (an iOS backup).
        case data(Data)
        /// Sealed as the row stores it: carried on by wrapping the item's key, never opened.
        case sealed(ItemSeal)
    }

    /// The secret, when the export opened it.
    public var data: Data? {
        guard case .data(let data) = secret else { return nil }
        return data
    }

    /// Why no backup or transfer carries it whatever its class (`ItemRecord.neverExported`);
    /// only a key's attributes are scanned, for its token.
    public var neverExported: NeverExported? {
        let tokenID = itemClass == .key ? (try? attributes.values(of: Self.token))?[.tokenID] : nil
        return NeverExported(itemClass: itemClass, tokenID: tokenID, accessControl: accessControl)
    }

    private static let token = AttributeSelection([.tokenID])
}

/// One entry of the change feed: an item as last written, or the tombstone a synchronizable
/// item left when it was deleted.
public struct ItemChange: Sendable {
    /// The device-wide sequence number of the write; strictly increasing, never reused.
    public var changeSequence: Int64
    public var isTombstone: Bool
    /// When the item was deleted: younger than its last modification.
    public var tombstoneDate: Date?
    /// The item with its class and protection class; `data` only when asked and not a tombstone.
    public var record: ItemRecord
}

/// An entry of the change feed whose class key is not in memory (class A while locked, class C
/// before first unlock): what the row's plaintext columns tell, and no more.
public struct SealedChange: Sendable {
    public var changeSequence: Int64
    public var uuid: UUID
    public var protection: ProtectionClass
    public var synchronizable: Bool
    public var isTombstone: Bool
}

extension Keychain {
    /// The change feed after `sequence` as far as the class keys in memory open it, oldest
    /// first: the entries that open, and apart from them those that stay sealed in this lock
    /// state and those that are damaged. The system's read (sync): it never fails for a lock
    /// state or a damaged row. Device scope only.
    public func availableChanges(
        since sequence: Int64, includingData: Bool = false
    ) throws -> (open: [ItemChange], sealed: [SealedChange], damaged: [DamagedItem]) {
        try requireDeviceScope()
        let rows = try device.database.unsafeRead { db in try Array(ItemTable.changes(db, since: sequence, accessGroupHashes: nil)) }
        return try available(rows) { row, keys in try openChange(row, keys: keys, includingData: includingData) }
    }

    /// A change as sync pushes it: the item without its secret, and its seal as the row holds
    /// it (a tombstone's without a secret), so no secret is opened on the way out.
    package struct SealedItemChange: Sendable {
        package var change: ItemChange
        package var seal: ItemSeal
    }

    /// A page of the change feed for sync to push: at most `limit` changes after `sequence`,
    /// as `availableChanges` reads them but with their seals, and without the changes that
    /// wrote a version sync holds (`replicaVersions`): those it wrote itself are left unopened.
    /// `through` is the last change the page read, left out or not. Device scope only.
    package func changesToPush(
        since sequence: Int64, limit: Int
    ) throws -> (open: [SealedItemChange], sealed: [SealedChange], damaged: [DamagedItem], through: Int64) {
        try requireDeviceScope()
        let (rows, through) = try device.database.unsafeRead { db in
            let rows = try Array(ItemTable.changes(db, since: sequence, accessGroupHashes: nil, limit: limit))
            guard let through = rows.last?.changeSequence else { return (rows, sequence) }
            let replicaWrites = try Set(Int64.fetchCursor(try ReplicaTable.writes(db), arguments: [sequence + 1, through]))
            return (rows.filter { !replicaWrites.contains($0.changeSequence) }, through)
        }
        let feed = try available(rows) { row, keys in
            guard let classKeys = keys[row.header.protection] else { throw unavailable(row.header.protection) }
            let (metadata, seal): (ItemMetadata, ItemSeal)
            do {
                (metadata, seal) = try row.sealed.opener(classKeys).travelling(
                    ItemMetadata.init(decoding:), entropy: device.entropy, withSecret: !row.isTombstone)
            } catch {
                _ = try openMetadata(row, keys: keys)  // Which tier failed, under the usual message.
                throw corrupt(row, "secret")
            }
            return SealedItemChange(
                change: ItemChange(
                    changeSequence: row.changeSequence, isTombstone: row.isTombstone, tombstoneDate: row.tombstoneDate,
                    record: record(row.header, metadata, data: nil)),
                seal: seal)
        }
        return (feed.open, feed.sealed, feed.damaged, through)
    }

    /// Opens with `open`, on every core, the rows the class keys in memory open; the rest stay
    /// sealed, and a row that fails authentication is set apart as damaged.
    private func available<Opened: Sendable>(
        _ rows: [StoredRow], _ open: @Sendable (StoredRow, [ProtectionClass: ClassKeys]) throws -> Opened
    ) throws -> (open: [Opened], sealed: [SealedChange], damaged: [DamagedItem]) {
        let keys = try device.availableKeys()
        let (openable, sealed) = rows.reduce(into: ([StoredRow](), [SealedChange]())) { split, row in
            if keys[row.header.protection] != nil {
                split.0.append(row)
            } else {
                split.1.append(
                    SealedChange(
                        changeSequence: row.changeSequence, uuid: row.header.uuid, protection: row.header.protection,
                        synchronizable: row.header.synchronizable, isTombstone: row.isTombstone))
            }
        }
        let opened = try ParallelMap.map(openable) { row in try opening(row) { try open(row, keys) } }
        var (open, damaged) = ([Opened](), [DamagedItem]())
        open.reserveCapacity(opened.count)
        for result in opened {
            switch result {
            case .success(let item): open.append(item)
            case .failure(let item): damaged.append(item)
            }
        }
        return (open, sealed, damaged)
    }

    /// What `open` makes of a row, or the row as damaged when it fails authentication; any
    /// other failure is thrown.
    func opening<Opened>(_ row: StoredRow, _ open: () throws -> Opened) throws -> Result<Opened, DamagedItem> {
        do {
            return .success(try open())
        } catch let error as KeychainError where error.status == .decode {
            return .failure(damagedItem(row, error))
        }
    }

    /// The last change sequence handed out on this device: every later write, local or
    /// replicated, gets a larger one.
    public var latestChangeSequence: Int64 { device.database.latestChangeSequence }

    /// Every item and tombstone written after `sequence`, oldest first: the one read path that
    /// sync and backup use. The device's own view reads secrets without user authentication,
    /// as the system does for backup, and passes over damaged rows (`availableChanges` names
    /// them); an app's view still asks, and fails on them.
    public func changes(
        since sequence: Int64, includingData: Bool = false,
        authentication: AuthenticationContext = .noInteraction
    ) throws -> [ItemChange] {
        if isDeviceScope {
            // The system's own read (backup, sync): the feed as the keys in memory open it, all of it.
            let feed = try availableChanges(since: sequence, includingData: includingData)
            if let sealed = feed.sealed.first { throw unavailable(sealed.protection) }
            return feed.open
        }
        let groupHashes = try groupsForReading(nil)?.map(accessGroupHash)
        let keys = try device.availableKeys()
        return try device.database.unsafeRead { db in
            try Array(ItemTable.changes(db, since: sequence, accessGroupHashes: groupHashes)).map { row in
                let record = try open(row, keys: keys, withData: includingData && !row.isTombstone, authentication: authentication, db)
                return ItemChange(
                    changeSequence: row.changeSequence, isTombstone: row.isTombstone,
                    tombstoneDate: row.tombstoneDate, record: record)
            }
        }
    }

    /// The system's read of every live item but the device's own, for work too large to hold at once (a backup of
    /// the whole device). Rows come in batches of `batchSize`. Off the calling thread, while the
    /// next batch is read from disk, each batch is cut into pieces that are opened and handed to
    /// `transform` on every core: one pass, with nothing left to do one core at a time.
    /// `consume` gets a batch's results in order on the calling thread, with the items handled
    /// so far and their total.
    /// A damaged row is left out and returned, so one bad row never stops a backup.
    @discardableResult
    package func forEachExportBatch<Result: Sendable>(
        batchSize: Int = 10_000, secrets: ExportedSecrets,
        transform: @escaping @Sendable ([ExportedItem]) throws -> Result,
        consume: (_ results: [Result], _ done: Int, _ total: Int) throws -> Void
    ) throws -> [DamagedItem] {
        precondition(isDeviceScope, "exports are the system's read of the whole device")
        let keys = try device.availableKeys()
        // A snapshot on a connection of its own: the device answers and writes while it runs.
        let damaged = Locked<[DamagedItem]>([])
        try device.database.readOnItsOwnConnection { db in
            let own = device.ownAccessGroupHash
            let total = try ItemTable.liveCount(db, excluding: own)
            let rows = try ItemTable.changes(db, since: 0, accessGroupHashes: nil)
            var inFlight: (work: BackgroundWork<[Result]>, count: Int)?
            // Whatever happens, no work outlives the call.
            defer { _ = try? inFlight?.work.result() }
            var done = 0
            while true {
                var batch: [StoredRow] = []
                batch.reserveCapacity(batchSize)
                while batch.count < batchSize, let row = try rows.next() {
                    if !row.isTombstone && row.header.accessGroupHash != own { batch.append(row) }
                }
                if let (work, count) = inFlight {
                    inFlight = nil
                    done += count
                    try consume(try work.result(), done, total)
                }
                guard !batch.isEmpty else { return }
                inFlight = (
                    BackgroundWork { [self, batch] in
                        try ParallelMap.mapChunks(batch) { rows in
                            var exported: [ExportedItem] = []
                            exported.reserveCapacity(rows.count)
                            for row in rows {
                                switch try opening(row, { try export(row, keys: keys, secrets) }) {
                                case .success(let item): exported.append(item)
                                case .failure(let item): damaged.withLock { $0.append(item) }
                                }
                            }
                            return try transform(exported)
                        }
                    }, batch.count
                )
            }
        }
        return damaged.withLock { $0 }.sorted { $0.uuid.precedesInTextOrder($1.uuid) }
    }

    /// How an export hands out secrets.
    package enum ExportedSecrets: Sendable {
        case opened
        case sealed
    }

    private func export(_ row: StoredRow, keys: [ProtectionClass: ClassKeys], _ secrets: ExportedSecrets) throws -> ExportedItem {
        guard let classKeys = keys[row.header.protection] else { throw unavailable(row.header.protection) }
        do {
            let opener = try row.sealed.opener(classKeys)
            let decode = ItemMetadata.Fields<EncodedAttributes>.init(decoding:)
            let (metadata, secret): (ItemMetadata.Fields<EncodedAttributes>, ExportedItem.Secret)
            switch secrets {
            case .opened: (metadata, secret) = (try opener.metadata(decode), .data(try opener.secret()))
            case .sealed:
                let (fields, seal) = try opener.travelling(decode, entropy: device.entropy)
                (metadata, secret) = (fields, .sealed(seal))
            }
            return ExportedItem(
                uuid: row.header.uuid, itemClass: row.header.itemClass, protection: row.header.protection,
                synchronizable: row.header.synchronizable, accessGroup: metadata.accessGroup,
                accessControl: metadata.accessControl, creationDate: metadata.creationDate,
                modificationDate: metadata.modificationDate, attributes: metadata.attributes, secret: secret)
        } catch {
            // The item read, for its error: which tier failed, under the usual message.
            _ = try open(row, keys: keys, withData: true)
            throw corrupt(row, "secret")
        }
    }

    private func openChange(_ row: StoredRow, keys: [ProtectionClass: ClassKeys], includingData: Bool) throws -> ItemChange {
        ItemChange(
            changeSequence: row.changeSequence, isTombstone: row.isTombstone, tombstoneDate: row.tombstoneDate,
            record: try open(row, keys: keys, withData: includingData && !row.isTombstone))
    }

    private var isDeviceScope: Bool {
        if case .device = scope { return true }
        return false
    }
}
