import KeyferryCrypto

/// Security's random number generators: only the default one exists, as on Apple's platforms.
public final class SecRandom: Sendable {
    private init() {}
}

public typealias SecRandomRef = SecRandom
public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes from the system's
/// generator (through libsodium). errSecParam for a negative count.
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    guard count > 0 else { return errSecSuccess }
    SystemEntropy().bytes(count).withUnsafeBytes { random in
        bytes.copyMemory(from: random.baseAddress!, byteCount: count)
    }
    return errSecSuccess
}
