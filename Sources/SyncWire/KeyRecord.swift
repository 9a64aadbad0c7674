import Foundation
import KeychainModel
import KeyferryCrypto

/// A record of a circle's `keys` stream: a generation's class keys (sealed under its circle
/// key, so only members open them) or one member's share of a circle key, each signed by the
/// member who made the generation.
package enum KeyRecord: Sendable {
    case classKeys(PublishedClassKeys)
    case share(CircleKeyShare)

    package var epoch: UInt32 {
        switch self {
        case .classKeys(let keys): keys.epoch
        case .share(let share): share.epoch
        }
    }

    package var bytes: [UInt8] {
        var w = ByteWriter()
        switch self {
        case .classKeys(let keys):
            w.uint8(3)
            w.lengthPrefixed(keys.bytes)
        case .share(let share):
            w.uint8(2)
            w.lengthPrefixed(share.bytes)
        }
        return w.bytes
    }

    package init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            switch try r.uint8() {
            case 1: throw EnvelopeError.malformed("unsigned class keys, as an older Keyferry published them, are not read")
            case 2: self = .share(try CircleKeyShare(bytes: Array(try r.lengthPrefixed())))
            case 3: self = .classKeys(try PublishedClassKeys(bytes: Array(try r.lengthPrefixed())))
            default: throw EnvelopeError.malformed("unknown key record")
            }
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a key record") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a key record is truncated")
        }
    }
}
