import Foundation
import KeychainModel
import KeyferryCrypto

/// `.applicationPassword` access control: the secret is sealed under a key derived from the
/// app's own password (`LAContext.setCredential(_:type: .applicationPassword)`), so that no read
/// opens it without that password, as the Secure Enclave refuses one on a device. It is sealed on
/// the app's side of the call: the store, backups and sync carry only the sealed bytes.
enum ApplicationPassword {
    /// `kfap` and a version, then the Argon2id salt, then the sealed secret.
    private static let header = Array("kfap".utf8) + [1]

    static func isRequired(by accessControl: AccessControl?) -> Bool { accessControl?.flags.contains(.applicationPassword) == true }

    static func seal(_ secret: Data, password: Data) throws(KeychainError) -> Data {
        let salt = SystemEntropy().bytes(PasswordHashParameters.saltByteCount)
        return Data(header + salt) + AEAD.seal(secret, key: try key(password, salt: salt), associatedData: Data(header))
    }

    static func open(_ sealed: Data, password: Data) throws(KeychainError) -> Data {
        let bytes = [UInt8](sealed)
        let saltEnd = header.count + PasswordHashParameters.saltByteCount
        guard bytes.count > saltEnd, Array(bytes[..<header.count]) == header else {
            throw KeychainError(.decode, "the item has an application password but its secret was not sealed with one.")
        }
        do {
            return try AEAD.open(Data(bytes[saltEnd...]), key: try key(password, salt: Array(bytes[header.count..<saltEnd])), associatedData: Data(header))
        } catch {
            throw KeychainError(.authFailed, "the application password does not open this item.")
        }
    }

    private static func key(_ password: Data, salt: [UInt8]) throws(KeychainError) -> SymmetricKey {
        do {
            return try PasswordHash.argon2id(password: password, salt: salt, parameters: .interactive)
        } catch {
            throw KeychainError(.internalError, "the application password could not be hashed: \(error).")
        }
    }

    /// The password a call carries: its `LAContext`'s credential, else what the simulated user
    /// types at the system's prompt for it (a `passcode` response), when a prompt may be shown.
    /// `responses` are the ones the call already drew, if it drew them.
    static func password(
        for dictionary: [String: Any], in context: KeyferryContext, responses: [AuthenticationResponse]? = nil
    ) throws(KeychainError) -> Data {
        let authentication = dictionary[kSecUseAuthenticationContext] as? LAContext
        if let credential = authentication?.applicationPassword { return credential }
        let silent =
            authentication?.interactionNotAllowed == true || (dictionary[kSecUseAuthenticationUI] as? String).map { $0 != kSecUseAuthenticationUIAllow } == true
            || (dictionary[kSecUseNoAuthenticationUI] as? Bool) == true
        guard !silent else {
            throw KeychainError(
                .interactionNotAllowed,
                "the item needs the app's password (applicationPassword) and no prompt may be shown; give it with LAContext.setCredential(_:type: .applicationPassword)."
            )
        }
        switch (responses ?? context.responses()).first {
        case .passcode(let typed)?: return Data(typed.utf8)
        case .cancel?: throw KeychainError(.userCanceled, "the user cancelled the prompt for the app's password.")
        default: throw KeychainError(.authFailed, "the user did not type the app's password at its prompt.")
        }
    }
}
