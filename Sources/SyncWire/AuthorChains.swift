import Foundation
import KeychainModel
package import KeyferryCrypto

/// What a member has received of each other member's chain of batches: the head (the highest
/// sequence, and that batch's digest) and the sequences below it that never arrived. An author
/// pushes its batches in order and the relay serves them in push order, so a sequence skipped
/// is a batch withheld from this member (or lost): `sync status` shows it. Two members that
/// show different heads for one author see different logs.
package struct AuthorChains: Codable, Equatable, Sendable {
    package struct Chain: Codable, Equatable, Sendable {
        package var head: BatchLink
        /// Sequences below the head not received, oldest first.
        package var missing: [ClosedRange<UInt64>]
    }

    /// By the author's signing key, in hex.
    package private(set) var chains: [String: Chain] = [:]

    /// Gaps kept per author; past it the oldest two are merged, overstating rather than
    /// forgetting (a relay cannot make a member's state grow without bound).
    static let maximumGaps = 32

    package init() {}

    /// Notes a verified batch of `author` at `link`.
    package mutating func receive(_ link: BatchLink, from author: SigningPublicKey) {
        let key = Hex.encode(author.bytes)
        var chain = chains[key] ?? Chain(head: .start, missing: [])
        if link.sequence > chain.head.sequence {
            if link.sequence - chain.head.sequence > 1 { chain.missing.append((chain.head.sequence + 1)...(link.sequence - 1)) }
            chain.head = link
            if chain.missing.count > Self.maximumGaps {
                chain.missing[1] = chain.missing[0].lowerBound...chain.missing[1].upperBound
                chain.missing.removeFirst()
            }
        } else {
            // A batch below the head: one that was missing arrives late, or one seen again.
            chain.missing = chain.missing.flatMap { range -> [ClosedRange<UInt64>] in
                guard range.contains(link.sequence) else { return [range] }
                var parts: [ClosedRange<UInt64>] = []
                if range.lowerBound < link.sequence { parts.append(range.lowerBound...(link.sequence - 1)) }
                if link.sequence < range.upperBound { parts.append((link.sequence + 1)...range.upperBound) }
                return parts
            }
        }
        chains[key] = chain
    }

    /// Notes the relay's word that it dropped `sequences` of `author`'s chain, every version in
    /// them superseded (`CompactedBatches`): those gaps are no longer counted as missing.
    package mutating func compacted(_ sequences: [ClosedRange<UInt64>], of author: SigningPublicKey) {
        let key = Hex.encode(author.bytes)
        guard var chain = chains[key] else { return }
        chain.missing = chain.missing.flatMap { gap in
            sequences.reduce([gap]) { parts, dropped in
                parts.flatMap { part -> [ClosedRange<UInt64>] in
                    guard part.overlaps(dropped) else { return [part] }
                    var left: [ClosedRange<UInt64>] = []
                    if part.lowerBound < dropped.lowerBound { left.append(part.lowerBound...(dropped.lowerBound - 1)) }
                    if dropped.upperBound < part.upperBound { left.append((dropped.upperBound + 1)...part.upperBound) }
                    return left
                }
            }
        }
        chains[key] = chain
    }

    /// The chain of `author`, if any of its batches arrived.
    package func chain(of author: SigningPublicKey) -> Chain? { chains[Hex.encode(author.bytes)] }
}
