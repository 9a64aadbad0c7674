internal import CSodium
import Foundation

/// Secret bytes that are zeroed when the last reference goes away. Keys live here, never in
/// `Data` or arrays that the allocator might leave behind.
final class SecureBytes: @unchecked Sendable {
    // Immutable after init; the buffer is only written by `init` and `deinit`.
    let buffer: UnsafeMutableRawBufferPointer

    init(count: Int) {
        buffer = .allocate(byteCount: max(count, 1), alignment: 16)
        sodium_memzero(buffer.baseAddress, buffer.count)
    }

    convenience init<Bytes: Sequence>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        let array = Array(bytes)
        self.init(count: array.count)
        array.withUnsafeBytes { buffer.copyMemory(from: $0) }
    }

    var count: Int { buffer.count }

    deinit {
        sodium_memzero(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }
}
