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

extension KeyferryContext {
    /// Opens the secrets of the records that have an application password, with the one the
    /// call carries (asked for once).
    func openApplicationPasswords(
        _ records: inout [ItemRecord], asked dictionary: [String: Any], responses: [AuthenticationResponse]
    ) throws(KeychainError) {
        var password: Data?
        for index in records.indices where ApplicationPassword.isRequired(by: records[index].accessControl) {
            guard let sealed = records[index].data else { continue }
            let known: Data
            if let password {
                known = password
            } else {
                known = try ApplicationPassword.password(for: dictionary, in: self, responses: responses)
            }
            password = known
            records[index].data = try ApplicationPassword.open(sealed, password: known)
        }
    }

    /// A new secret for an update: sealed under the items' application password when they have
    /// one, which must open their current secret first, as a device asks for it before the change.
    func sealForUpdate(
        _ secret: Data, matching query: ItemQuery, asked dictionary: [String: Any], responses: [AuthenticationResponse]
    ) throws(KeychainError) -> Data {
        // Which items the update changes, by their attributes alone: no prompt.
        var probe = query
        probe.returning = .attributes
        probe.matchLimit = .all
        let matched: [ItemRecord]
        do {
            matched = try backend.copy(probe, app: app)
        } catch is KeychainError {
            // Nothing matches, or nothing can be read now: the update answers for itself.
            return secret
        } catch {
            throw KeychainError(.notAvailable, "\(error)")
        }
        let protected = matched.filter { ApplicationPassword.isRequired(by: $0.accessControl) }
        guard !protected.isEmpty else { return secret }
        guard protected.count == matched.count else {
            throw KeychainError(.param, "the update's items differ in having an application password; update those with one apart.")
        }
        let password = try ApplicationPassword.password(for: dictionary, in: self, responses: responses)
        var current = query
        current.returning = .data
        current.matchLimit = .one
        if let sealed = try? backend.copy(current, app: app).first?.data { _ = try ApplicationPassword.open(sealed, password: password) }
        return try ApplicationPassword.seal(secret, password: password)
    }
}
