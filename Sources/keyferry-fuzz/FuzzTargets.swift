import AppleFormats
import Backup
import Crypto
import Fleet
import Foundation
import KeychainModel
import KeychainStore
import KeyferryCrypto
import KeyferrySecurity
import NodeControl
import PhoneBackup
import Scenario
import SyncWire

/// The readers of everything Keyferry takes from outside, each run on arbitrary bytes: an
/// input gets an error or a value, never a trap, a hang or unbounded memory. Fuzzed with
/// libFuzzer (`scripts/fuzz`); every input of `Tests/FuzzCorpus/TARGET/` is replayed by the
/// test suite.
enum FuzzTarget: String, CaseIterable {
    case archive, envelope, batch, membership, keys, fleet, scenario, request, bplist, derplist, keybag, keychainitem, mbfile, pkcs12, certificate
    case manifestdb, phoneitem, compactionnote, joins

    func run(_ bytes: [UInt8]) {
        switch self {
        case .archive: Self.archive(bytes)
        case .envelope:
            if let envelope = try? SealedEnvelope(bytes: bytes) {
                _ = try? envelope.open(with: CircleKeys(circle: envelope.header.circle, epoch: envelope.header.epoch, entropy: Self.fixedEntropy))
            }
        case .batch:
            if let batch = try? EnvelopeBatch(bytes: bytes) { _ = try? batch.verified(members: [batch.author]) }
        case .compactionnote:
            // What a relay writes and members take: read, written again the same, applied to a chain.
            if let note = try? CompactedBatches(bytes: bytes) {
                precondition(note.bytes == bytes)
                var chains = AuthorChains()
                chains.receive(BatchLink(sequence: UInt64.max, digest: [UInt8](repeating: 0, count: 32)), from: note.author)
                chains.compacted(note.sequences, of: note.author)
            }
        case .membership:
            if let entry = try? MembershipEntry(bytes: bytes) {
                _ = try? CircleHistory(verifying: [entry])
                _ = try? CircleHistory.reading([bytes, bytes], circle: entry.circle)
            }
        case .keys:
            if let record = try? KeyRecord(bytes: bytes) {
                switch record {
                case .classKeys(let keys): _ = keys.isSigned(by: keys.signer, circle: keys.circle)
                case .share(let share): _ = share.isSigned(by: share.sender, circle: share.circle)
                }
            }
        case .joins:
            // What anyone may push to a relay's joins stream: read, written again the same, checked.
            if let record = try? JoinRecord(bytes: bytes) {
                precondition(record.bytes == bytes)
                switch record {
                case .request(let request): _ = (request.digest, request.code.description)
                case .voucher(let voucher): _ = voucher.isSignedBySponsor
                case .decline(let decline): _ = decline.isSigned
                }
            }
        case .fleet: _ = try? FleetFile(yaml: String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml")
        case .scenario:
            _ = try? Scenario(yaml: String(decoding: bytes, as: UTF8.self), file: "fuzz.yaml", directory: FileManager.default.temporaryDirectory)
        case .request: Self.requests(Data(bytes))
        case .bplist:
            // What it reads, it writes again and reads back the same.
            if let value = try? BinaryPropertyList.decode(Data(bytes)) {
                precondition((try? BinaryPropertyList.decode(BinaryPropertyList.encode(value))) == value || value.containsNaN)
            }
        case .keybag:
            // Reading only: a keybag that parses never costs its rounds here.
            if let keybag = try? BackupKeybag(tlv: Data(bytes)) { precondition((try? BackupKeybag(tlv: keybag.tlv)) == keybag) }
        case .derplist:
            if let value = try? DERPropertyList.decode(Data(bytes)), let encoded = try? DERPropertyList.encode(value) {
                precondition((try? DERPropertyList.decode(encoded)) != nil)
            }
        case .keychainitem:
            // One sealed item of keychain-backup.plist, read and opened under a fixed class key.
            if let item = try? SealedKeychainItem(bytes: bytes) {
                precondition((try? SealedKeychainItem(bytes: item.bytes)) == item)
                _ = try? item.open(classKey: Self.fixedClassKey)
            }
        case .mbfile:
            // A Manifest.db row's record: what it reads, it writes again and reads back the same.
            if let value = try? BinaryPropertyList.decode(Data(bytes)), let record = try? BackupFileRecord(keyedArchive: value) {
                precondition((try? BackupFileRecord(keyedArchive: record.keyedArchive)) == record)
            }
        case .manifestdb:
            // A decrypted Manifest.db as its author wrote it: schema checked, rows read, each
            // record decoded or named.
            _ = try? ManifestDatabase.read(Data(bytes), maximumRows: 10_000) {}
        case .phoneitem:
            // An opened keychain item's DER attributes, as a restore makes an item of them.
            if let attributes = try? DERPropertyList.decode(Data(bytes)) {
                for table in ItemClass.allCases where table != .identity {
                    _ = PhoneKeychainItem.record(from: attributes, table: table, protection: .afterFirstUnlock, sealedBytes: bytes, backupDate: Date())
                }
                if let accc = attributes["accc"]?.data { _ = try? AccessControlData.asksForUser(accc) }
            }
        case .pkcs12:
            // A .p12 under the corpus's password, "fuzz": MAC, bags, keys and their certificates.
            if let file = try? PKCS12(Data(bytes), password: "fuzz") { _ = try? SecIdentity.identities(in: file) }
        case .certificate:
            // A DER certificate, and everything Keychain Services derives from it.
            if let certificate = SecCertificate(der: Data(bytes)) {
                _ = certificate.newItem
                _ = SecCertificateCopySubjectSummary(certificate)
                _ = SecCertificateCopyKey(certificate)
            }
        }
    }

    /// The class key the sealed keychain items of the corpus were made under (all zeros).
    private static let fixedClassKey = Crypto.SymmetricKey(data: [UInt8](repeating: 0, count: 32))

    /// Keys made the same way every run, so a crash replays.
    private static var fixedEntropy: SeededEntropy { SeededEntropy(seed: 1) }

    /// Through every check a restore makes before it touches a device: header, password,
    /// sections (with and without the writing device's keys: UID 32 bytes of 0x07, as in the
    /// test vectors), manifest. Password hashing past libsodium's minimum is left out: its
    /// bound is tested, and an input that costs seconds is not worth a million cheap ones.
    private static func archive(_ bytes: [UInt8]) {
        guard let reader = try? ArchiveReader(bytes: Data(bytes)) else { return }
        _ = try? reader.unverifiedManifest()
        let hashing = reader.header.passwordHashing?.parameters
        let cheap = hashing.map { $0.operations <= 2 && $0.memoryBytes <= 64 << 10 } ?? true
        let keys = DeviceBackupKeys(deviceID: reader.header.deviceID, hardwareUID: fuzzUID)
        _ = try? reader.read(password: cheap && reader.header.mode == .encrypted ? Data("fuzz".utf8) : nil, device: keys)
        _ = try? reader.read(password: nil)
    }

    private static let fuzzUID = try! SymmetricKey(bytes: Array(repeating: 7, count: 32))

    /// Every body the node's control API decodes.
    private static func requests(_ data: Data) {
        let decoder = JSONDecoder()
        _ = try? decoder.decode(NodeAPI.Add.self, from: data)
        _ = try? decoder.decode(NodeAPI.Search.self, from: data)
        _ = try? decoder.decode(NodeAPI.SearchMany.self, from: data)
        _ = try? decoder.decode(NodeAPI.Update.self, from: data)
        _ = try? decoder.decode(NodeAPI.List.self, from: data)
        _ = try? decoder.decode(NodeAPI.Backup.self, from: data)
        _ = try? decoder.decode(NodeAPI.Transfer.self, from: data)
        _ = try? decoder.decode(NodeAPI.Passcode.self, from: data)
        _ = try? decoder.decode(NodeAPI.Unlock.self, from: data)
        _ = try? decoder.decode(NodeAPI.Clock.self, from: data)
        _ = try? decoder.decode(NodeAPI.Defaults.self, from: data)
        _ = try? decoder.decode(NodeAPI.File.self, from: data)
        _ = try? decoder.decode(NodeAPI.Biometry.self, from: data)
        _ = try? decoder.decode(NodeAPI.CircleCreate.self, from: data)
        _ = try? decoder.decode(NodeAPI.SurvivalOptions.self, from: data)
    }
}

#if FUZZING
    /// libFuzzer's driver, for a program with a main of its own (SwiftPM names every executable's
    /// entry point): it runs the callback on each input it makes.
    @_silgen_name("LLVMFuzzerRunDriver")
    private func runFuzzer(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// libFuzzer's callback: the target KEYFERRY_FUZZ_TARGET names, on one input.
    @_cdecl("LLVMFuzzerTestOneInput")
    func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzTarget.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }

    /// The entry point SwiftPM links as `main`: libFuzzer's driver, on that callback.
    @_cdecl("keyferry_fuzz_main")
    func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        _ = fuzzTarget
        var count = argc
        var arguments = argv
        return runFuzzer(&count, &arguments, fuzzOne)
    }

    private let fuzzTarget: FuzzTarget = {
        guard let name = ProcessInfo.processInfo.environment["KEYFERRY_FUZZ_TARGET"], let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("set KEYFERRY_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
            exit(64)
        }
        return target
    }()
#else
    /// Without libFuzzer: `keyferry-fuzz TARGET FILE...` runs the target on each file (a corpus, a
    /// crash to reproduce), and says how many it ran.
    @main
    struct ReplayInputs {
        static func main() {
            let arguments = CommandLine.arguments.dropFirst()
            guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
                print("usage: keyferry-fuzz TARGET FILE...  (targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")))")
                exit(64)
            }
            var count = 0
            for path in arguments.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else {
                    print("cannot read \(path)")
                    exit(1)
                }
                target.run([UInt8](data))
                count += 1
            }
            print("\(target.rawValue): \(count) inputs, no crash")
        }
    }
#endif

extension PropertyList {
    /// NaN is unequal to itself, so a value holding one never compares equal after a round trip.
    fileprivate var containsNaN: Bool {
        switch self {
        case .real(let number): number.isNaN
        case .date(let date): date.timeIntervalSinceReferenceDate.isNaN
        case .array(let elements): elements.contains { $0.containsNaN }
        case .dictionary(let entries): entries.values.contains { $0.containsNaN }
        default: false
        }
    }
}
