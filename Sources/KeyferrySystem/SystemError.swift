#if canImport(Glibc)
    import Glibc
#endif

/// A call into the C library that failed: its `errno`, and what it was doing.
package struct SystemError: Error, Sendable, CustomStringConvertible {
    package let code: Int32
    /// What failed, as the start of a sentence ("cannot open /x/node.lock"); nil alone.
    package let action: String?

    package init(code: Int32, action: String? = nil) {
        self.code = code
        self.action = action
    }

    /// The failure of the call just made.
    static func last(_ action: String? = nil) -> SystemError { SystemError(code: errno, action: action) }

    /// The system's words for the code, lowercased to sit inside a sentence ("permission denied").
    package var reason: String { Self.reason(code) }

    package var description: String { action.map { "\($0): \(reason)" } ?? reason }

    /// The system's words for an `errno` value, lowercased to sit inside a sentence.
    package static func reason(_ code: Int32) -> String { String(cString: strerror(code)).lowercased() }

    /// Something is already where the call would have put a file or directory.
    package var isOccupied: Bool { code == EEXIST || code == ENOTEMPTY }
    /// A listening socket's address is taken by another.
    package var isAddressInUse: Bool { code == EADDRINUSE }
}
