public import Foundation
@_exported import SecConstantObjects
@_exported import SecConstants

// The Core Foundation names keychain code is written with. On Apple's platforms they are
// toll-free bridged classes; here each is the Swift or Foundation type it bridges to, so the
// spellings people write compile unchanged: `kSecClass as String`, `query as CFDictionary`,
// `[CFString: Any]`, `result as? Data`, `result as? [[String: Any]]`, `kCFBooleanTrue!`.
// `CFString` and the constants are in SecConstants.

/// What `SecItemCopyMatching` hands back: data, a dictionary or an array of them, as objects.
public typealias CFTypeRef = AnyObject
/// A query or an attribute dictionary: `[String: Any]` and `[CFString: Any]` convert to it with
/// `as`, and a dictionary literal can be written as one. The SecItem functions take an
/// `NSDictionary` too (SecItem.swift). Not `NSDictionary` itself: Foundation on Linux would copy
/// every key and value into one and back out on each call.
public typealias CFDictionary = [AnyHashable: Any]
public typealias CFData = Data
public typealias CFArray = [Any]
public typealias CFBoolean = Bool
public typealias CFNumber = NSNumber
public typealias CFIndex = Int
/// The raw value of option sets such as `SecAccessControlCreateFlags`.
public typealias CFOptionFlags = UInt

/// Core Foundation's allocator argument; only the default exists.
public final class CFAllocator: Sendable {
    private init() {}
}

public let kCFAllocatorDefault: CFAllocator! = nil

/// An error handed back through `Unmanaged<CFError>`; `as Error` reads it as on Apple's
/// platforms. Its domain is `NSOSStatusErrorDomain`, its code the status.
public final class CFError: Error, CustomStringConvertible, Sendable {
    public let code: OSStatus
    public let message: String

    init(_ code: OSStatus, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) (OSStatus \(code))" }
    public var localizedDescription: String { message }
}

/// Foundation's out-parameter for an error (`var error: NSError?` then `error: &error`), which
/// Foundation on Linux does not declare.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

public func CFErrorGetCode(_ error: CFError) -> CFIndex { CFIndex(error.code) }

/// `NSOSStatusErrorDomain`: every error Keychain Services hands back carries an `OSStatus`.
public func CFErrorGetDomain(_ error: CFError) -> CFString { "NSOSStatusErrorDomain" }

/// The error's user info: its description under `NSLocalizedDescription`.
public func CFErrorCopyUserInfo(_ error: CFError) -> CFDictionary! { [NSLocalizedDescriptionKey: error.message] }

public func CFErrorCopyDescription(_ error: CFError) -> CFString! { error.message }
