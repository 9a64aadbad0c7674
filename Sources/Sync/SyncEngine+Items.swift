import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferryThreads
import SyncWire

/// The member's items: its own writes stamped, sealed and pushed a batch at a time, and the
/// others' pulled, verified, opened and kept by the merge rule (Protocol/sync.md).
extension SyncEngine {
    /// Whether the change at `sequence` is still to push: not pushed already, and not one of
    /// `ownWrites` (the engine's writes of received versions, and its pushes).
    func isPending(_ sequence: Int64, _ ownWrites: Set<Int64>) -> Bool {
        sequence > pushedThrough && !ownWrites.contains(sequence)
    }

    /// The changes after `pushedThrough`, through `last`, that wrote a version this member holds.
    static func ownWrites(on device: Device, after pushedThrough: Int64, through last: Int64) throws -> Set<Int64> {
        guard last > pushedThrough else { return [] }
        return try device.deviceKeychain.replicaWrites(in: (pushedThrough + 1)...last)
    }

    /// Whether a sealed change is of an item that replicates; synchronizable items carry no
    /// access control, so the plaintext columns tell.
    func replicates(_ change: SealedChange) -> Bool {
        change.synchronizable && !change.protection.isThisDeviceOnly
    }

    /// Sets how many changes a push reads at a time (tests cross page boundaries with few items).
    package func setPushPage(_ changes: Int) { pushPage = max(changes, 1) }

    func push(_ report: inout SyncReport, as identity: DeviceIdentity) async throws {
        guard let keys = generations[history.epoch] else { return }
        var after = pushedThrough
        // Sealed in this lock state: they wait, and nothing from the first of them on counts as pushed.
        var firstWaiting: Int64?
        report.waitingToPush = 0
        while true {
            // What the engine wrote itself (versions received) stays out, unopened.
            let (since, limit) = (after, pushPage)
            let page = try await device.run { try $0.deviceKeychain.changesToPush(since: since, limit: limit) }
            guard page.through > after else { break }
            after = page.through
            let sealed = page.sealed.filter(replicates)
            report.waitingToPush += sealed.count
            report.damaged += page.damaged.filter(\.synchronizable).prefix(SyncReport.keptReasons - report.damaged.count).map(\.description)
            firstWaiting = firstWaiting ?? sealed.first?.changeSequence
            try await push(page.open, keys: keys, &report, as: identity)
            // Each stamp is a reading: fold those no change still to stamp needs, page by page.
            clock.forget(through: firstWaiting.map { $0 - 1 } ?? after)
        }
        pushedThrough = firstWaiting.map { $0 - 1 } ?? after
        clock.forget(through: pushedThrough)
    }

    /// Seals and pushes the pending changes of one page that replicate, a batch at a time: each
    /// item's key re-wrapped, its secret's ciphertext as the keychain holds it.
    private func push(_ changes: [Keychain.SealedItemChange], keys: CircleKeys, _ report: inout SyncReport, as identity: DeviceIdentity) async throws {
        let author = identity.signingKey
        let replicating = changes.filter { sealed in
            switch SyncEligibility(sealed.change.record) {
            case .replicates: return true
            case .deviceBound:
                report.skippedDeviceBound += 1
                return false
            case .notSynchronizable, .accessControlled: return false
            }
        }
        let held = try await device.run { [replicating] in try $0.deviceKeychain.heldVersions(of: replicating.map(\.change.record.uuid)) }
        let items = replicating.map { sealed in
            let (change, record) = (sealed.change, sealed.change.record)
            let item = KeyedItem(
                uuid: record.uuid, itemClass: record.itemClass, protection: record.protection,
                version: stamp(change, after: held[record.uuid]?.stamp.timestamp), isTombstone: change.isTombstone,
                key: sealed.seal.key, metadata: sealed.seal.metadata, secret: sealed.seal.secret)
            return (item: item, changeSequence: change.changeSequence)
        }
        // A batch at a time, so the others start on the first while the rest is sealed.
        for start in stride(from: 0, to: items.count, by: EnvelopeBatch.maximumCount) {
            let page = items[start..<min(start + EnvelopeBatch.maximumCount, items.count)]
            let sealedPage = try await BlockingPool.shared.run { [page] _ in
                try ParallelMap.map(Array(page)) { item in
                    (envelope: try SealedEnvelope.seal(item.item, keys: keys, author: author.publicKey), stamp: item.item.stamp)
                }
            }
            let batches = EnvelopeBatch.batches(of: sealedPage.map(\.envelope), circle: circle, author: author, after: ownChain)
            try await push(batches.map(\.bytes), to: .envelopes, as: identity)
            ownChain = batches.last?.link ?? ownChain
            let versions = Dictionary(zip(page, sealedPage).map { ($0.item.uuid, HeldVersion(stamp: $1.stamp, changeSequence: $0.changeSequence).replica) }) {
                $1
            }
            try await device.run { try $0.deviceKeychain.recordReplicaVersions(versions) }
            report.pushed += page.count
        }
    }

    /// A local change's version: the time it was made (its modification date, or its deletion
    /// date), after everything this member had seen or written before it, and after
    /// `previous`, the version of the item it replaces.
    private func stamp(_ change: ItemChange, after previous: HybridTimestamp?) -> HybridTimestamp {
        let date = change.isTombstone ? change.tombstoneDate ?? change.record.modificationDate : change.record.modificationDate
        let milliseconds = date.timeIntervalSince1970 * 1000
        var version = clock.stamp(
            changeAt: change.changeSequence,
            wallMilliseconds: milliseconds.isFinite && milliseconds > 0 ? UInt64(min(milliseconds, 1e18)) : 0)
        if let previous, version <= previous {
            version = previous.successor
            clock.observe(version, at: change.changeSequence)
        }
        return version
    }

    func pull(_ report: inout SyncReport, _ identity: DeviceIdentity) async throws {
        let retry = waiting
        waiting = []
        try await apply(retry, &report)
        var read = 0
        while read < Self.maximumRecordsPerPass {
            let records: [RelayRecord]
            do {
                records = try await transport.pull(circle: circle, stream: .envelopes, after: cursors[.envelopes] ?? 0, limit: 8)
            } catch RelayError.resyncNeeded {
                return try await resync(&report, identity)
            }
            guard let last = records.last else { return }
            for record in records { try await receive(record, identity, &report) }
            cursors[.envelopes] = last.cursor
            read += records.count
        }
        report.more = true
    }

    /// Takes one record of the envelopes stream: a batch is verified and applied, a compaction
    /// note explains gaps.
    private func receive(_ record: RelayRecord, _ identity: DeviceIdentity, _ report: inout SyncReport) async throws {
        do {
            // The relay's word on batches it compacted: gaps it explains, nothing to apply.
            if CompactedBatches.isNote(record.body) {
                let note = try CompactedBatches(bytes: record.body)
                guard note.circle == circle else { throw EnvelopeError.inconsistent("a compaction note for another circle") }
                received.compacted(note.sequences, of: note.author)
                return
            }
            let batch = try EnvelopeBatch(bytes: record.body)
            if batch.envelopes.contains(where: \.header.isTombstone) { deletionsRead = true }
            // This member's own batches come back too.
            guard batch.author != identity.signingKey.publicKey else { return }
            let members = Set(history.members.keys)
            let envelopes = try await BlockingPool.shared.run { _ in try batch.verified(members: members) }
            received.receive(BatchLink(sequence: batch.sequence, digest: ContentDigest.of(record.body)), from: batch.author)
            try await apply(envelopes, &report)
        } catch let error as EnvelopeError {
            report.reject(Refusal(error))
        }
    }

    /// The relay let go of deletions this member had not seen: it reads every envelope again
    /// from the start, then deletes here the items the relay says were deleted (its forgotten
    /// deletions) whose version here is no newer than the deletion and did not change here
    /// since it was pushed. Nothing deleted so is pushed: a relay that lies here can make this
    /// member drop items, never the others.
    private func resync(_ report: inout SyncReport, _ identity: DeviceIdentity) async throws {
        report.resynced = true
        var cursor: UInt64 = 0
        while true {
            let records = try await transport.pull(circle: circle, stream: .envelopes, after: cursor, limit: 64)
            guard let last = records.last else { break }
            for record in records { try await receive(record, identity, &report) }
            cursor = last.cursor
        }
        cursors[.envelopes] = cursor
        var after: UUID?
        while true {
            let page = try await transport.forgottenDeletions(circle: circle, after: after, limit: 1_000)
            guard let last = page.last else { break }
            let pushedThrough = pushedThrough
            report.forgottenInResync += try await device.run { device in
                let held = try device.deviceKeychain.heldVersions(of: page.map(\.item))
                let deleted = page.filter { deletion in held[deletion.item].map { $0.stamp.timestamp <= deletion.version } ?? false }
                return try device.deviceKeychain.forgetReplicas(Set(deleted.map(\.item)), unchangedSince: pushedThrough, at: device.now).count
            }
            after = last.item
        }
    }

    /// Opens a batch's envelopes on every core, keeps the versions the merge rule prefers, and
    /// writes them in one transaction. The envelopes' signature has been checked: on arrival,
    /// or before they were kept waiting for unlock.
    func apply(_ envelopes: [SealedEnvelope], _ report: inout SyncReport) async throws {
        let generations = generations
        let (opened, held) = try await device.run { device in
            let now = device.now
            let opened = try ParallelMap.map(envelopes) { envelope in
                Result { () throws(EnvelopeError) -> Received in
                    guard let keys = generations[envelope.header.epoch] else {
                        throw .cannotDecrypt(
                            "item \(envelope.header.item) is sealed under key generation \(envelope.header.epoch), which this member does not hold")
                    }
                    let received: Received
                    do {
                        received = try Received(try envelope.open(with: keys))
                    } catch let error as EnvelopeError { throw error } catch { throw .malformed("\(error)") }
                    try received.item.checkReceived(now: now)
                    return received
                }
            }
            return (opened, try device.deviceKeychain.heldVersions(of: opened.compactMap { try? $0.get().item.record.uuid }))
        }
        var chosen: [(envelope: SealedEnvelope, received: Received)] = []
        var positions: [UUID: Int] = [:]
        var newest = HybridTimestamp.zero
        for (envelope, result) in zip(envelopes, opened) {
            switch result {
            case .failure(let error):
                report.reject(Self.refusal(error))
            case .success(let received):
                newest = max(newest, received.item.version)
                let uuid = received.item.record.uuid
                let current = positions[uuid].map { chosen[$0].received.stamp } ?? held[uuid]?.stamp
                if let current, !MergeRule.prefers(received.stamp, over: current) {
                    report.superseded += 1
                    continue
                }
                if let position = positions[uuid] {
                    chosen[position] = (envelope, received)
                    report.superseded += 1
                } else {
                    positions[uuid] = chosen.count
                    chosen.append((envelope, received))
                }
            }
        }
        // Whatever is written here, a local change made after it is stamped after what was seen.
        guard !chosen.isEmpty else { return try await observe(newest) }
        let versions = chosen.map { choice in
            let item = choice.received.item
            return Keychain.ReplicatedVersion(
                record: item.record,
                tombstoneDate: item.isTombstone ? Date(timeIntervalSince1970: Double(item.version.milliseconds) / 1000) : nil,
                version: choice.received.stamp.stored, sealed: choice.received.sealed)
        }
        let stamps = chosen.map(\.received.stamp)
        do {
            // Two items added apart under one primary key: the preferred one stays everywhere.
            let outcomes = try await device.run { device in
                try device.deviceKeychain.applyReplicated(versions) { index, holder in
                    guard let other = holder.flatMap(HeldVersion.init) else { return true }
                    return MergeRule.prefers(stamps[index], over: other.stamp)
                }
            }
            try await observe(newest)
            for outcome in outcomes {
                switch outcome {
                case .written:
                    report.applied += 1
                case .superseded:
                    report.superseded += 1
                case .keptDeviceBound:
                    report.keptDeviceBound += 1
                }
            }
        } catch let error as KeychainError where error.status == .interactionNotAllowed {
            // Locked: class A cannot be sealed here yet. Keep it sealed and write the rest; before
            // first unlock nothing can be written, and everything waits.
            let now = chosen.filter { $0.envelope.header.syncClass != .a }
            let later = chosen.filter { $0.envelope.header.syncClass == .a }
            guard !later.isEmpty, !now.isEmpty else {
                waiting += chosen.map(\.envelope)
                report.waitingForUnlock += chosen.count
                return try await observe(newest)
            }
            waiting += later.map(\.envelope)
            report.waitingForUnlock += later.count
            try await apply(now.map(\.envelope), &report)
            try await observe(newest)
        } catch {
            for choice in chosen { report.reject(.unwritable, "item \(choice.received.item.record.uuid): \(error)") }
            try await observe(newest)
        }
    }

    /// Folds the newest version seen into the clock, at the keychain's latest change.
    private func observe(_ newest: HybridTimestamp) async throws {
        clock.observe(newest, at: try await device.run { $0.deviceKeychain.latestChangeSequence })
    }
}
