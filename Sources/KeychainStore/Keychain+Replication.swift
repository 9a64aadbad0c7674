package import Foundation
import GRDB
package import KeychainModel
import KeyferryCrypto
import KeyferryThreads

extension Keychain {
    /// A version another member wrote, to write here: the item, or with `tombstoneDate` the
    /// tombstone of its deletion.
    package struct ReplicatedVersion: Sendable {
        /// The item; its `data` only when it came without a seal.
        package var record: ItemRecord
        package var tombstoneDate: Date?
        /// The version as sync names it, kept with the write (`replicaVersions`).
        package var version: [UInt8]
        /// The item as its author's keychain sealed it, opened: its secret stored as it came, its
        /// key wrapped under this device's class key. nil seals `record` here.
        package var sealed: ItemSeal.Opened?

        package init(record: ItemRecord, tombstoneDate: Date?, version: [UInt8], sealed: ItemSeal.Opened? = nil) {
            self.record = record
            self.tombstoneDate = tombstoneDate
            self.version = version
            self.sealed = sealed
        }
    }

    /// What sync keeps of an item it holds a version of: the version, in bytes the store does
    /// not read, and the change sequence of the write that put it here or that sync pushed.
    /// Kept beside the items, as Apple's keychain keeps its sync mirror beside them: a million
    /// items cost sync no memory, and a replicated write commits together with its version.
    package struct ReplicaVersion: Sendable, Equatable {
        package var version: [UInt8]
        package var changeSequence: Int64

        package init(version: [UInt8], changeSequence: Int64) {
            self.version = version
            self.changeSequence = changeSequence
        }
    }

    /// What became of one replicated version.
    package enum ReplicationOutcome: Sendable, Equatable {
        /// Written, at this change sequence.
        case written(changeSequence: Int64)
        /// Another item holds its primary key and stays: `replaces` said so.
        case superseded
        /// A live device-bound item (ThisDeviceOnly, or not synchronizable) holds its primary
        /// key: replication never replaces one, whoever wrote the synced version.
        case keptDeviceBound(UUID)
    }

    /// Writes synchronizable items as other members wrote them (UUID, dates, group, protection,
    /// attributes), their seals re-wrapped (or records sealed) on every core, and written in one
    /// transaction with their versions.
    /// A row with the same UUID gives way. A row with another UUID under the same primary key
    /// gives way, and its version with it, only when it is not device-bound and `replaces` says
    /// so (it is asked with that row's version, nil when sync holds none); otherwise the
    /// version is not written. Each outcome carries the change sequence written, so the sync
    /// engine can tell its own writes from the device's. Device scope only.
    package func applyReplicated(
        _ versions: [ReplicatedVersion], replaces: (_ index: Int, _ holder: ReplicaVersion?) -> Bool
    ) throws -> [ReplicationOutcome] {
        try requireDeviceScope()
        let keys = try device.availableKeys()
        let rows = try ParallelMap.map(versions) { version -> SealedRow in
            let record = version.record
            guard record.synchronizable, !record.protection.isThisDeviceOnly, record.accessControl == nil else {
                throw KeychainError(.param, "only synchronizable items without access control replicate.")
            }
            guard let classKeys = keys[record.protection] else { throw unavailable(record.protection) }
            guard let opened = version.sealed else { return sealedRow(for: record, keys: classKeys) }
            return sealedRow(for: opened, keys: classKeys, nonces: device.entropy.bytes(2 * AEAD.nonceByteCount)[...])
        }
        return try device.database.write { db in
            try device.database.saveChangeCounter(db)
            var outcomes: [ReplicationOutcome] = []
            for (index, (row, version)) in zip(rows, versions).enumerated() {
                if let holding = try ItemTable.keyHolder(db, primaryKeyHash: row.header.primaryKeyHash), case let holder = holding.uuid,
                    holder != row.header.uuid
                {
                    let bound = holding.protection?.isThisDeviceOnly ?? true
                    if !holding.isTombstone, bound || !holding.synchronizable {
                        outcomes.append(.keptDeviceBound(holder))
                        continue
                    }
                    if !replaces(index, try ReplicaTable.version(db, of: holder)) {
                        outcomes.append(.superseded)
                        continue
                    }
                    try ReplicaTable.remove(db, holder)
                }
                try ItemTable.giveWay(db, uuid: row.header.uuid, primaryKeyHash: row.header.primaryKeyHash)
                var sequence = device.database.nextChangeSequence()
                _ = try ItemTable.insert(db, row, changeSequence: sequence)
                if let date = version.tombstoneDate {
                    sequence = device.database.nextChangeSequence()
                    try ItemTable.bury(db, id: db.lastInsertedRowID, at: date, changeSequence: sequence)
                }
                try ReplicaTable.record(db, row.header.uuid, ReplicaVersion(version: version.version, changeSequence: sequence), replacing: true)
                outcomes.append(.written(changeSequence: sequence))
            }
            return outcomes
        }
    }

    /// The versions sync holds of `uuids`, of those it holds one of. Device scope only.
    package func replicaVersions(of uuids: some Sequence<UUID>) throws -> [UUID: ReplicaVersion] {
        try requireDeviceScope()
        return try device.database.unsafeRead { db in
            var found: [UUID: ReplicaVersion] = [:]
            for uuid in uuids { found[uuid] = try ReplicaTable.version(db, of: uuid) }
            return found
        }
    }

    /// The change sequences in `range` that wrote a version sync holds: its own writes of what
    /// others sent, and what it pushed. Device scope only.
    package func replicaWrites(in range: ClosedRange<Int64>) throws -> Set<Int64> {
        try requireDeviceScope()
        return try device.database.unsafeRead { db in
            try Set(Int64.fetchCursor(try ReplicaTable.writes(db), arguments: [range.lowerBound, range.upperBound]))
        }
    }

    /// Keeps `versions` as the ones sync holds; with `replacing` false, a version held already
    /// stays. Device scope only.
    package func recordReplicaVersions(_ versions: [UUID: ReplicaVersion], replacing: Bool = true) throws {
        try requireDeviceScope()
        try device.database.write { db in
            for (uuid, version) in versions { try ReplicaTable.record(db, uuid, version, replacing: replacing) }
        }
    }

    /// Deletes here the items of `uuids` the circle deleted while this member was away: each
    /// that is live, that sync holds a version of, and that did not change here since
    /// `pushedThrough` becomes a tombstone that sync wrote (never pushed: the circle deleted it
    /// already), its version kept. Returns those buried. Device scope only.
    package func forgetReplicas(_ uuids: Set<UUID>, unchangedSince pushedThrough: Int64, at date: Date) throws -> [UUID] {
        try requireDeviceScope()
        return try device.database.write { db in
            try device.database.saveChangeCounter(db)
            let statement = try db.cachedStatement(
                sql: """
                    SELECT item.id, replica.version FROM item JOIN replica ON replica.uuid = item.uuid
                    WHERE item.uuid = ? AND item.tomb = 0 AND item.sync = 1 AND item.change_seq <= ?
                    """)
            var forgotten: [UUID] = []
            for uuid in uuids {
                guard let row = try Row.fetchOne(statement, arguments: [uuid.bytes, pushedThrough]) else { continue }
                let sequence = device.database.nextChangeSequence()
                try ItemTable.bury(db, id: row[0], at: date, changeSequence: sequence)
                try ReplicaTable.record(db, uuid, ReplicaVersion(version: [UInt8](row[1] as Data), changeSequence: sequence), replacing: true)
                forgotten.append(uuid)
            }
            return forgotten
        }
    }

    /// Forgets every version sync held: the device left its circle. Device scope only.
    package func forgetReplicaVersions() throws {
        try requireDeviceScope()
        try device.database.write(ReplicaTable.removeAll)
    }

    /// The row a record becomes on this device, sealed under this device's class keys, with
    /// `secret` or else the record's data.
    func sealedRow(for record: ItemRecord, keys: ClassKeys, secret: Data? = nil) -> SealedRow {
        let metadata = Self.metadata(of: record)
        let header = header(
            uuid: record.uuid, itemClass: record.itemClass, protection: record.protection,
            synchronizable: record.synchronizable, metadata: metadata)
        return SealedRow.seal(
            header: header, metadata: metadata, secret: secret ?? record.data ?? Data(), keys: keys,
            random: device.entropy.bytes(SealedRow.entropyPerRow))
    }

    /// The row an item that arrived sealed (restored, replicated) becomes on this device: its
    /// secret as it came, its key wrapped under this device's class key (the first of `nonces`'
    /// two); its metadata under the metadata key, as it opened when it may stay so, else with
    /// what an add writes.
    func sealedRow(for opened: ItemSeal.Opened, keys: ClassKeys, nonces: ArraySlice<UInt8>) -> SealedRow {
        let record = opened.record
        let header = header(
            uuid: record.uuid, itemClass: record.itemClass, protection: record.protection, synchronizable: record.synchronizable,
            accessGroup: record.accessGroup, attributes: record.itemClass.withPrimaryKeyDefaults(record.attributes))
        return SealedRow.wrapping(
            opened.seal, metadata: opened.storableMetadata ?? Self.metadata(of: record).encoded, header: header, keys: keys, nonces: nonces)
    }

    /// A record's metadata as written on arrival: biometry bindings never travel.
    static func metadata(of record: ItemRecord) -> ItemMetadata {
        ItemMetadata(
            accessGroup: record.accessGroup, accessControl: record.accessControl, biometryBinding: [],
            creationDate: record.creationDate, modificationDate: record.modificationDate,
            attributes: record.itemClass.withPrimaryKeyDefaults(record.attributes))
    }
}

/// The `replica` table: one row per item sync holds a version of.
enum ReplicaTable {
    /// Read by position, as `StoredRow` is: a `Row` per lookup would cost more than the lookup.
    /// Stepped to the end (one row at most), so the statement is reset and holds no snapshot.
    static func version(_ db: Database, of uuid: UUID) throws -> Keychain.ReplicaVersion? {
        let statement = try db.cachedStatement(sql: "SELECT change_seq, version FROM replica WHERE uuid = ?")
        let cursor = try Int64.fetchCursor(statement, arguments: [uuid.bytes]).map { sequence in
            Keychain.ReplicaVersion(
                version: statement.bytes(at: 1) ?? [], changeSequence: sequence)
        }
        return try Array(cursor).first
    }

    static func writes(_ db: Database) throws -> Statement {
        try db.cachedStatement(sql: "SELECT change_seq FROM replica WHERE change_seq BETWEEN ? AND ?")
    }

    static func record(_ db: Database, _ uuid: UUID, _ version: Keychain.ReplicaVersion, replacing: Bool) throws {
        let statement = try db.cachedStatement(
            sql: replacing
                ? "INSERT OR REPLACE INTO replica (uuid, version, change_seq) VALUES (?, ?, ?)"
                : "INSERT OR IGNORE INTO replica (uuid, version, change_seq) VALUES (?, ?, ?)")
        statement.setUncheckedArguments([uuid.bytes, Data(version.version), version.changeSequence])
        try statement.execute()
    }

    static func removeAll(_ db: Database) throws { try db.execute(sql: "DELETE FROM replica") }

    static func remove(_ db: Database, _ uuid: UUID) throws {
        try db.cachedStatement(sql: "DELETE FROM replica WHERE uuid = ?").execute(arguments: [uuid.bytes])
    }
}
