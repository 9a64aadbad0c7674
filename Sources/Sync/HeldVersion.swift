import Foundation
import KeychainModel
import KeychainStore
import SyncWire

/// A version this member holds of an item: what it is, and the write that put it in the
/// keychain (the engine's own write of what another member sent, or the change it pushed).
/// They live in the device's keychain database (`Keychain.ReplicaVersion`), read a page at a
/// time, so a member's memory does not grow with the number of items it holds.
struct HeldVersion {
    var stamp: VersionStamp
    var changeSequence: Int64

    var replica: Keychain.ReplicaVersion { Keychain.ReplicaVersion(version: stamp.stored, changeSequence: changeSequence) }

    init(stamp: VersionStamp, changeSequence: Int64) {
        self.stamp = stamp
        self.changeSequence = changeSequence
    }

    /// Nil for bytes this build did not write: the item then counts as held by no version,
    /// and the next version of it that arrives is taken.
    init?(_ replica: Keychain.ReplicaVersion) {
        guard let stamp = VersionStamp(stored: replica.version) else { return nil }
        self.stamp = stamp
        changeSequence = replica.changeSequence
    }
}

extension VersionStamp {
    /// As the keychain keeps it: milliseconds (u64) and counter (u32), little-endian, and the
    /// digest (32 bytes).
    var stored: [UInt8] {
        var w = ByteWriter(capacity: 12 + digest.count)
        w.uint64(timestamp.milliseconds)
        w.uint32(timestamp.counter)
        w.raw(digest)
        return w.bytes
    }

    init?(stored: [UInt8]) {
        var r = ByteReader(stored)
        guard let milliseconds = try? r.uint64(), let counter = try? r.uint32(), let digest = try? r.raw(32), r.isAtEnd else { return nil }
        self.init(timestamp: HybridTimestamp(milliseconds: milliseconds, counter: counter), digest: [UInt8](digest))
    }
}

extension Keychain {
    /// The versions this member holds of `uuids`, of those it holds one of.
    func heldVersions(of uuids: some Sequence<UUID>) throws -> [UUID: HeldVersion] {
        try replicaVersions(of: uuids).compactMapValues(HeldVersion.init)
    }
}
