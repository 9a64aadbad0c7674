import Foundation
public import KeychainModel

/// `kSecAttrAccessControl`'s value: the accessibility plus what the user must prove.
public typealias SecAccessControl = AccessControl
public typealias SecAccessControlCreateFlags = AccessControlFlags

extension AccessControlFlags {
    @available(*, deprecated, renamed: "biometryAny")
    public static var touchIDAny: AccessControlFlags { .biometryAny }
    @available(*, deprecated, renamed: "biometryCurrentSet")
    public static var touchIDCurrentSet: AccessControlFlags { .biometryCurrentSet }
}

/// Apple's constructor. nil with `error` set for an unknown accessibility or flags Apple
/// refuses (both `.or` and `.and`, nothing to prove): errSecParam.
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: Any, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    do {
        guard let name = protection as? String, let protectionClass = ProtectionClass(name: name) else {
            throw KeychainError(.param, "'\(protection)' is not a kSecAttrAccessible value.")
        }
        return try AccessControl(protection: protectionClass, flags: flags)
    } catch let failure as KeychainError {
        error?.pointee = Unmanaged.passRetained(CFError(failure.status.rawValue, failure.message))
        return nil
    } catch {
        return nil
    }
}
