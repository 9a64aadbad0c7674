internal import CSodium
import Foundation
import KeyferryThreads

/// Where keys, nonces and salts come from. Injected so tests and test vectors are repeatable.
public protocol EntropySource: Sendable {
    func bytes(_ count: Int) -> [UInt8]
}

/// The operating system's CSPRNG through libsodium.
public struct SystemEntropy: EntropySource {
    public init() { _ = Sodium.ready }

    public func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.sodiumBase, $0.count) }
        return out
    }
}

/// A repeatable stream of bytes from a 32-byte seed (ChaCha20 under libsodium's deterministic
/// generator). For tests and published vectors only: every instance with the same seed yields
/// the same sequence.
public final class SeededEntropy: EntropySource {
    private let seed: [UInt8]
    private let counter = Locked<UInt64>(0)

    public init(seed: UInt64) {
        _ = Sodium.ready
        var bytes = [UInt8](repeating: 0, count: Int(randombytes_SEEDBYTES))
        withUnsafeBytes(of: seed.littleEndian) { bytes.replaceSubrange(0..<8, with: $0) }
        self.seed = bytes
    }

    public func bytes(_ count: Int) -> [UInt8] {
        // Each draw derives its own seed from (seed, draw number) so draws of any size stay
        // independent of each other.
        let draw = counter.withLock { value -> UInt64 in
            value += 1
            return value
        }
        var drawSeed = KeyedHash.digest(
            of: withUnsafeBytes(of: draw.littleEndian) { Array($0) }, keyBytes: seed, length: 32)
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { buffer in
            drawSeed.withUnsafeBytes { randombytes_buf_deterministic(buffer.sodiumBase, buffer.count, $0.sodiumBase) }
        }
        SymmetricKey.wipe(&drawSeed)
        return out
    }
}
