import Foundation
import KeychainModel
import SyncWire

/// What a member remembers between runs, in `sync.json` in its device directory. Nothing in it
/// is secret: the identity and the circle keys stay in the keychain (`SyncSecrets`); the
/// membership is signed and the class keys are sealed. Written whole to a temporary file and
/// renamed, so a crash leaves the previous state; a member that restarts from it pulls and
/// pushes again, which the merge rule makes harmless.
struct SyncState: Codable {
    /// 2: the versions held moved into the keychain's database (`HeldVersion`); format 1
    /// states still load, and their versions move there.
    static let formatVersion = 2

    struct Held: Codable {
        var milliseconds: UInt64
        var counter: UInt32
        var digest: Data
        var changeSequence: Int64
    }

    var format = Self.formatVersion
    var name: String
    /// This member's signing key (public): who it is in the membership, readable while its
    /// identity is still sealed before first unlock. Absent from states written before it.
    var member: Data?
    var relay: URL
    var membership: [Data]
    /// Each generation's class keys, sealed under its circle key, by epoch.
    var classKeys: [UInt32: Data]
    var cursors: [String: UInt64]
    var pushedThrough: Int64
    /// The clock's latest reading; what older builds read.
    var clock: HybridTimestamp
    /// The clock's readings by change sequence (`HybridClock`); absent from older states,
    /// which start from `clock` at `pushedThrough`.
    var clockReadings: [HybridClock.Reading]?
    /// Format 1 only.
    var held: [UUID: Held]?
    /// Envelopes waiting for unlock, as received.
    var waiting: [Data]
    /// The head of this member's chain of batches, and what arrived of the others'; absent
    /// from states written before batches were chained.
    var ownChain: BatchLink?
    var received: AuthorChains?

    static func url(in directory: URL) -> URL { DeviceLayout(root: directory).syncState }

    /// Forgets the circle: the state goes, so the device is in none.
    static func remove(from directory: URL) throws {
        let url = url(in: directory)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    static func load(from directory: URL) throws -> SyncState? {
        let url = url(in: directory)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let state: SyncState
        do {
            state = try JSONDecoder().decode(SyncState.self, from: Data(contentsOf: url))
        } catch {
            throw CircleError(.unreadableState, "\(url.path) is unreadable (\(error)); move it aside to leave the circle and join again.")
        }
        guard (1...formatVersion).contains(state.format) else {
            throw CircleError(.unreadableState, "\(url.path) has format \(state.format), newer than this build reads.")
        }
        return state
    }

    func save(in directory: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(self).write(to: Self.url(in: directory), options: .atomic)
    }
}
