import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

@Suite("Device profiles")
struct DeviceProfileTests {
    private func make(_ options: DeviceOptions) throws -> (Device, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-profile-\(UUID().uuidString)")
        var options = options
        options.passcodeHashing = .minimum
        return (try Device.create(at: directory, options: options, clock: ManualClock()), directory)
    }

    @Test("the Simulator has no passcode to set, yet takes whenPasscodeSetThisDeviceOnly items and biometry, and never locks them away")
    func simulator() throws {
        let (device, directory) = try make(DeviceOptions(name: "Sim", enrollBiometry: true, profile: .simulator))
        defer {
            device.powerOff()
            try? FileManager.default.removeItem(at: directory)
        }
        #expect(throws: DeviceError.self) { try device.setPasscode("123456", current: nil) }
        try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        let keychain = try device.keychain(for: TestDevice.appID)
        for protection in ProtectionClass.allCases {
            try keychain.add(NewItem(.genericPassword, attributes: [.account: .string(protection.name)], data: Data("x".utf8), protection: protection))
        }
        try device.lock(immediately: true)
        try device.reboot()
        for protection in ProtectionClass.allCases {
            let found = try keychain.copy(ItemQuery(.genericPassword, attributes: [.account: .string(protection.name)], returning: [.data]))
            #expect(found.first?.data == Data("x".utf8), "\(protection.name) is read on a locked, rebooted Simulator")
        }
        let status = try device.status()
        #expect(status.profile == .simulator && status.biometryEnrolled && !status.passcodeSet)
        #expect(try Device.info(at: directory).profile == .simulator)
        let stored = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("device.json"))) as? [String: Any]
        #expect(stored?["format"] as? Int == 2 && stored?["profile"] as? String == "simulator", "a build before profiles refuses it")
    }

    @Test("an iPhone is as before: no passcode means no whenPasscodeSetThisDeviceOnly items, and its device.json is format 1 without a profile")
    func iphone() throws {
        #expect(throws: DeviceError.self) { try self.make(DeviceOptions(name: "Sim", passcode: "123456", profile: .simulator)) }
        let (device, directory) = try make(DeviceOptions(name: "Phone"))
        defer {
            device.powerOff()
            try? FileManager.default.removeItem(at: directory)
        }
        try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        #expect(throws: KeychainError.self) {
            try device.keychain(for: TestDevice.appID).add(
                NewItem(.genericPassword, attributes: [.account: .string("a")], data: Data(), protection: .whenPasscodeSetThisDeviceOnly))
        }
        let stored = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("device.json"))) as? [String: Any]
        #expect(stored?["format"] as? Int == 1 && stored?["profile"] == nil)
        #expect(try device.status().profile == .iphone)
        #expect(throws: DeviceError.self) { try DeviceProfile(named: "watch") }
    }
}
