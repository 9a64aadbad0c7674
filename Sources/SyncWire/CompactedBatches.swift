package import Foundation
import KeychainModel
package import KeyferryCrypto

/// A relay's note, in a circle's `envelopes` stream, of the batches of one author it dropped
/// because every version in them was superseded (Protocol/relay.md, "Compaction"). The relay
/// writes it, so nothing signs it: it tells a member that the gaps it names in the author's
/// chain are compaction, not withholding, which a relay could do anyway by serving nothing.
/// One note per author; the relay appends it again, at the stream's end, whenever it grows.
package struct CompactedBatches: Equatable, Sendable {
    package let circle: UUID
    package let author: SigningPublicKey
    /// The dropped sequences, ascending, disjoint and not adjacent.
    package private(set) var sequences: [ClosedRange<UInt64>]

    static let magic = Array("KFSC".utf8)
    static let formatVersion: UInt8 = 1
    /// Ranges in one note; a relay that would need more keeps the batches instead.
    package static let maximumRanges = 4_096

    package init(circle: UUID, author: SigningPublicKey, sequences: [ClosedRange<UInt64>] = []) {
        self.circle = circle
        self.author = author
        self.sequences = []
        for range in sequences { insert(range) }
    }

    /// Whether `bytes` are a note rather than a batch (`KFSB`).
    package static func isNote(_ bytes: [UInt8]) -> Bool { bytes.starts(with: magic) }

    package init(bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        do {
            guard Array(try r.raw(4)) == Self.magic else { throw EnvelopeError.malformed("no KFSC magic") }
            let format = try r.uint8()
            guard format == Self.formatVersion else { throw EnvelopeError.unsupportedFormat(format) }
            circle = try r.uuid()
            author = try SigningPublicKey(bytes: Array(try r.raw(SigningPublicKey.byteCount)))
            let count = Int(try r.uint32())
            guard count <= Self.maximumRanges else { throw EnvelopeError.malformed("a compaction note of \(count) ranges") }
            var ranges: [ClosedRange<UInt64>] = []
            for _ in 0..<count {
                let (first, last) = (try r.uint64(), try r.uint64())
                // Ascending and apart, from 1: one reading, whoever wrote it.
                guard first >= 1, first <= last, ranges.last.map({ Self.apart($0, first...last) }) ?? true else {
                    throw EnvelopeError.malformed("a compaction note whose ranges are not ascending and apart")
                }
                ranges.append(first...last)
            }
            sequences = ranges
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a compaction note is truncated")
        } catch is CryptoError {
            throw EnvelopeError.malformed("author key")
        }
        guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a compaction note") }
    }

    package var bytes: [UInt8] {
        var w = ByteWriter(capacity: 4 + 1 + 16 + 32 + 4 + 16 * sequences.count)
        w.raw(Self.magic)
        w.uint8(Self.formatVersion)
        w.uuid(circle)
        w.raw(author.bytes)
        w.uint32(UInt32(sequences.count))
        for range in sequences {
            w.uint64(range.lowerBound)
            w.uint64(range.upperBound)
        }
        return w.bytes
    }

    /// Adds `range`, merging it with the ranges it touches.
    package mutating func insert(_ range: ClosedRange<UInt64>) {
        var merged = range
        var kept: [ClosedRange<UInt64>] = []
        for held in sequences {
            if Self.apart(held, merged) || Self.apart(merged, held) {
                kept.append(held)
            } else {
                merged = min(held.lowerBound, merged.lowerBound)...max(held.upperBound, merged.upperBound)
            }
        }
        kept.append(merged)
        sequences = kept.sorted { $0.lowerBound < $1.lowerBound }
    }

    /// Whether `lower` ends before `upper` starts, with a sequence between (no `+ 1` that a
    /// sequence of `UInt64.max` would overflow).
    private static func apart(_ lower: ClosedRange<UInt64>, _ upper: ClosedRange<UInt64>) -> Bool {
        lower.upperBound < upper.lowerBound && upper.lowerBound - lower.upperBound > 1
    }
}
