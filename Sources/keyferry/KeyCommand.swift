import ArgumentParser
import Foundation
import KeychainModel
import KeyferrySecurity
import KeyferryThreads
import NodeControl

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Make keys in a device's keychain, as SecKeyCreateRandomKey with kSecAttrIsPermanent does.",
        subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make a private key and keep it in the app's keychain; print its public key.",
            discussion: """
                The key is stored as Apple's keychain stores a key an app made with \
                SecKeyCreateRandomKey and kSecAttrIsPermanent: a keys-class item with its class, type, \
                size, the SHA-1 of its public key as kSecAttrApplicationLabel, the tag and label given, \
                and the key itself as its data. App code finds it by its tag (kSecReturnRef gives a \
                SecKey); `keyferry item get --class key --attr applicationTag=...` shows it. The public \
                key is printed as PEM (a SubjectPublicKeyInfo openssl reads); --json adds the item.

                --secure-enclave makes it as kSecAttrTokenIDSecureEnclave does: a P-256 key that \
                never leaves the device. App code cannot export it, and no backup, transfer or sync \
                carries it (`keyferry survival` says so for each path).
                """)

        enum KeyType: String, ExpressibleByArgument, CaseIterable {
            case ec, rsa
        }

        @OptionGroup var device: DeviceDirectory
        @Option(help: "The calling app's bundle ID.", transform: Checked.bundleID) var app: String
        @Option(help: "ec (kSecAttrKeyTypeECSECPrimeRandom) or rsa.") var type: KeyType = .ec
        @Option(help: "kSecAttrKeySizeInBits: 256, 384 or 521 for ec (default 256); 2048 to 4096 in steps of 128 for rsa (default 2048).") var bits: Int?
        @Option(help: "kSecAttrApplicationTag, as text or with hex: or base64:.") var tag: String
        @Option(help: "kSecAttrLabel.") var label: String?
        @Flag(help: "Make it in the Secure Enclave (kSecAttrTokenIDSecureEnclave): P-256 only, bound to this device.")
        var secureEnclave = false
        @Option(help: "kSecAttrAccessGroup: which of the app's groups (default: its first).") var group: String?
        @Option(help: "kSecAttrAccessible (default: whenUnlocked).") var accessible: ProtectionClass?
        @Option(
            help: ArgumentHelp("kSecAttrAccessControl flags joined by their combinator, e.g. biometryCurrentSet.", valueName: "EXPR"),
            transform: Checked.accessControl)
        var accessControl: String?
        @OptionGroup var output: OutputOptions

        func validate() throws {
            if secureEnclave, type != .ec || (bits ?? 256) != 256 {
                throw ValidationError("--secure-enclave: the Secure Enclave makes P-256 keys only (--type ec --bits 256).")
            }
            guard let bits else { return }
            switch type {
            case .ec where ![256, 384, 521].contains(bits):
                throw ValidationError("--bits \(bits): an ec key is on P-256, P-384 or P-521 (256, 384 or 521).")
            case .rsa where !(2048...4096).contains(bits) || bits % 128 != 0:
                throw ValidationError("--bits \(bits): an rsa key has 2048 to 4096 bits, in steps of 128 (2048, 3072, 4096 ...).")
            default: break
            }
        }

        func run() async throws {
            var given: Attributes = [.applicationTag: try attributeValue(tag, key: .applicationTag, name: "--tag")]
            if let label { given[.label] = .string(label) }
            if secureEnclave { given[.tokenID] = .string(NeverExported.secureEnclaveToken) }
            let attributes = given
            let (rsa, bits) = (type == .rsa, bits ?? (type == .rsa ? 2048 : 256))
            // An RSA key takes seconds to find: off the cooperative pool.
            let key = try await BlockingPool.shared.run { _ in try SecKey.random(rsa: rsa, bits: bits, attributes: attributes) }
            var item = key.newItem
            item.accessGroup = group
            item.returning = .attributes
            if let accessControl {
                item.accessControl = try AccessControl(protection: accessible ?? .whenUnlocked, expression: accessControl)
            } else {
                item.protection = accessible
            }
            let answer: NodeAPI.Items = try await device.client.call(.add, NodeAPI.Add(app: app, item: item))
            if output.json {
                printJSON(["item": answer.items.first?.presented(withData: false) ?? [:], "publicKey": key.publicKeyPEM])
            } else {
                say(answer.items.map(\.headline).joined(separator: "\n"))
                print(key.publicKeyPEM)
            }
        }
    }
}
