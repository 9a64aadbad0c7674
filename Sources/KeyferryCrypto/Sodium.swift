internal import CSodium

/// libsodium must be initialised once before any other call; every entry point of this module
/// goes through `Sodium.ready` first.
enum Sodium {
    static let ready: Void = {
        // sodium_init returns 1 when already initialised, -1 only when the library cannot work.
        precondition(sodium_init() >= 0, "libsodium failed to initialise")
    }()
}

extension Sodium {
    /// Checks the status of a libsodium call that fails only on arguments this module sizes
    /// itself (key, nonce and output lengths): a failure is a defect in Keyferry or libsodium,
    /// never bad input, and going on would hand out bytes that were never written.
    static func check(_ status: Int32, _ call: StaticString) {
        precondition(status == 0, "libsodium's \(call) failed")
    }

    /// libsodium declares its buffers non-null even when empty; empty Swift buffers have no
    /// base address, so they borrow this one byte instead.
    nonisolated(unsafe) static let emptyByte = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
}

extension UnsafeRawBufferPointer {
    var sodiumBase: UnsafePointer<UInt8> { baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(Sodium.emptyByte) }
}

extension UnsafeMutableRawBufferPointer {
    var sodiumBase: UnsafeMutablePointer<UInt8> { baseAddress?.assumingMemoryBound(to: UInt8.self) ?? Sodium.emptyByte }
}
