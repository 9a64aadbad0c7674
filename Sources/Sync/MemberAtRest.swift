package import Foundation
import KeychainModel
package import KeyferryCrypto
package import SyncWire

/// What a member's directory says of its circle while no node runs: read from the state it
/// remembers (`sync.json`), whose membership is signed and verified here. Nothing secret is
/// read, so a powered-off device answers `circle status` and `sync status` without a passcode.
package struct MemberAtRest: Sendable {
    package var circle: UUID
    package var relay: URL
    package var name: String
    package var epoch: UInt32
    /// By name, as a running member lists them.
    package var members: [PeerIdentity]
    /// This member's signing key; nil in states written before it was kept.
    package var me: SigningPublicKey?
    /// Whether the membership it last read still counts it.
    package var isMember: Bool
    package var received: AuthorChains
    /// When an exchange last moved something (the state is rewritten only then).
    package var lastChange: Date?

    /// Nil when the device is in no circle.
    package static func read(from directory: URL) throws -> MemberAtRest? {
        guard let state = try SyncState.load(from: directory) else { return nil }
        let history: CircleHistory
        do {
            history = try CircleHistory(verifying: state.membership.map { try MembershipEntry(bytes: [UInt8]($0)) })
        } catch {
            throw CircleError(.unreadableState, "the membership kept in \(SyncState.url(in: directory).path) does not verify (\(error)).")
        }
        let me = state.member.flatMap { try? SigningPublicKey(bytes: [UInt8]($0)) }
        let modified = try? FileManager.default.attributesOfItem(atPath: SyncState.url(in: directory).path)[.modificationDate] as? Date
        return MemberAtRest(
            circle: history.circle, relay: state.relay, name: state.name, epoch: history.epoch,
            members: history.members.values.sorted { $0.name < $1.name }, me: me, isMember: me.map(history.isMember) ?? true,
            received: state.received ?? AuthorChains(), lastChange: modified)
    }
}
