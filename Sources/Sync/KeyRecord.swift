import Foundation
import KeychainModel
import KeyferryCrypto

/// A record of a circle's `keys` stream: a generation's class keys (sealed under its circle
/// key, so only members open them) or one member's share of a circle key.
public enum KeyRecord: Sendable {
    case classKeys(epoch: UInt32, wrapped: [UInt8])
    case share(CircleKeyShare)

    public var bytes: [UInt8] {
        var w = ByteWriter()
        switch self {
        case .classKeys(let epoch, let wrapped):
            w.uint8(1)
            w.uint32(epoch)
            w.lengthPrefixed(wrapped)
        case .share(let share):
            w.uint8(2)
            w.lengthPrefixed(share.bytes)
        }
        return w.bytes
    }

    public init(bytes: [UInt8]) throws {
        do {
            var r = ByteReader(bytes)
            switch try r.uint8() {
            case 1: self = .classKeys(epoch: try r.uint32(), wrapped: Array(try r.lengthPrefixed()))
            case 2: self = .share(try CircleKeyShare(bytes: Array(try r.lengthPrefixed())))
            default: throw EnvelopeError.malformed("unknown key record")
            }
            guard r.isAtEnd else { throw EnvelopeError.malformed("bytes after a key record") }
        } catch is ByteReader.Malformed {
            throw EnvelopeError.malformed("a key record is truncated")
        }
    }
}
