// Seed 002's code as it stands (the credentials in the wrong places, its KeychainManager and
// the first-launch check); only the imports differ on Linux, and the first snippet's top-level
// statements sit in a function with the values they name.
#if canImport(Security)
import Security
#else
import KeyferrySecurity
#endif
import Foundation

struct Credentials: Codable {
    var username: String
    var password: String
}

func storeCredentialsInTheWrongPlaces(authToken: String, credentials: Credentials) throws -> String? {
    let encoder = JSONEncoder()
    // ❌ Session token stored in UserDefaults — readable in simulator file system,
    //    included in unencrypted iTunes backups on non-password-protected Macs,
    //    and potentially logged by analytics frameworks that snapshot UserDefaults.
    UserDefaults.standard.set(authToken, forKey: "session_token")
    let token = UserDefaults.standard.string(forKey: "session_token")

    // ❌ API key hardcoded in source — visible in the compiled binary via
    //    `strings YourApp.app/YourApp | grep sk-` or a disassembler.
    let pixarAPIKey = "sk-pixar-prod-abc123xyz"

    // ❌ Credentials written to a file in the Documents directory —
    //    included in iTunes backups, readable if the device is jailbroken.
    let credentialsPath = FileManager.default
        .urls(for: .documentDirectory, in: .userDomainMask)[0]
        .appendingPathComponent("credentials.json")
    try encoder.encode(credentials).write(to: credentialsPath)
    return token
}

enum KeychainError: Error, LocalizedError {
    case itemNotFound
    case duplicateItem
    case unexpectedData
    case unhandledError(status: OSStatus)

    var errorDescription: String? {
        switch self {
        case .itemNotFound:
            return "The requested Keychain item does not exist."
        case .duplicateItem:
            return "A Keychain item with this service/account already exists."
        case .unexpectedData:
            return "The Keychain item data could not be decoded."
        case .unhandledError(let status):
            return "Keychain operation failed with OSStatus \(status)."
        }
    }
}

struct KeychainManager {

    // MARK: - Save

    static func save(_ data: Data, service: String, account: String) throws {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account,
            kSecValueData: data
        ]

        let status = SecItemAdd(query as CFDictionary, nil)

        switch status {
        case errSecSuccess:
            break // Item created successfully.
        case errSecDuplicateItem:
            // Item already exists — update it instead.
            try update(data, service: service, account: account)
        default:
            throw KeychainError.unhandledError(status: status)
        }
    }

    // MARK: - Read

    static func read(service: String, account: String) throws -> Data {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account,
            kSecReturnData: true,        // Ask for the raw data back.
            kSecMatchLimit: kSecMatchLimitOne  // Return at most one result.
        ]

        var result: AnyObject?
        let status = SecItemCopyMatching(query as CFDictionary, &result)

        switch status {
        case errSecSuccess:
            guard let data = result as? Data else {
                throw KeychainError.unexpectedData
            }
            return data
        case errSecItemNotFound:
            throw KeychainError.itemNotFound
        default:
            throw KeychainError.unhandledError(status: status)
        }
    }

    // MARK: - Update

    static func update(_ data: Data, service: String, account: String) throws {
        // The query identifies which item to update.
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account
        ]

        // attributesToUpdate contains only the values to change.
        let attributesToUpdate: [CFString: Any] = [kSecValueData: data]

        let status = SecItemUpdate(query as CFDictionary, attributesToUpdate as CFDictionary)

        guard status == errSecSuccess else {
            throw KeychainError.unhandledError(status: status)
        }
    }

    // MARK: - Delete

    static func delete(service: String, account: String) throws {
        let query: [CFString: Any] = [
            kSecClass: kSecClassGenericPassword,
            kSecAttrService: service,
            kSecAttrAccount: account
        ]

        let status = SecItemDelete(query as CFDictionary)

        // errSecItemNotFound is acceptable on delete — treat as a no-op.
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw KeychainError.unhandledError(status: status)
        }
    }
}

// On app launch, detect and handle tokens from previous installations.
func handleAppLaunch() {
    let isFirstLaunch = !UserDefaults.standard.bool(forKey: "hasLaunchedBefore")

    if isFirstLaunch {
        // Clear any Keychain items from a previous installation.
        // Otherwise the user might be "auto-logged-in" unexpectedly.
        try? KeychainManager.delete(service: "com.pixar.tracker", account: "credentials")
        UserDefaults.standard.set(true, forKey: "hasLaunchedBefore")
    }
}
