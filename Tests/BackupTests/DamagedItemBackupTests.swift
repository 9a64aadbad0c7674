import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

@testable import Backup

/// A device with a damaged row still backs up, and transfers, everything else.
@Suite("Backups of a device with a damaged row")
struct DamagedItemBackupTests {
    @Test("backup create leaves the damaged item out, names it in a warning, and archives the rest")
    func backupLeavesItOut() throws {
        let fixture = try TestDevice()
        let keychain = try fixture.keychain()
        for account in ["first", "second", "third"] { try keychain.add(.password(account: account, value: "\(account)-secret")) }
        let damaged = try #require(try keychain.copy(.password(account: "second")).first?.uuid)
        fixture.device.powerOff()
        // Its attributes: an archive carries a secret sealed as stored, never opened, so a
        // damaged secret travels on and is reported by the restore that opens it.
        try fixture.damageAttributes(of: damaged)
        let device = try Device.powerOn(at: fixture.directory, clock: fixture.clock)
        defer { device.powerOff() }
        try device.unlock(passcode: TestDevice.defaultPasscode)

        let url = fixture.directory.deletingLastPathComponent().appendingPathComponent("damaged.kfbackup")
        let password = Data("pw".utf8)
        let manifest = try DeviceBackup.create(from: device, to: url, mode: .encrypted(password: password, parameters: .minimum))
        #expect(manifest.warnings.contains { $0.contains("1 damaged keychain item left out") && $0.contains(damaged.uuidString) }, "\(manifest.warnings)")
        var archived: [ArchivedItem] = []
        try ArchiveReader(contentsOf: url).read(password: password) { kind, content in
            if kind == .keychain { archived += try EntryList.decode(content).map(ArchivedItem.init(decoding:)) }
        }
        #expect(archived.count == 2 && !archived.contains { $0.uuid == damaged })
    }
}
