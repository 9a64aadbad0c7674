/// The big-endian integers of 1 to 8 bytes that Apple's formats count in, read and written in
/// one place.
enum BigEndian {
    /// The low `count` bytes of `number`, most significant first.
    static func bytes(_ number: UInt64, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: number >> (8 * UInt64(count - 1 - $0))) }
    }

    /// The number `bytes` (at most 8 of them) spell, most significant first.
    static func number(_ bytes: some Collection<UInt8>) -> UInt64 {
        bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
