import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Testing

/// Stolen Device Protection, by iOS version (Protocol/profiles.md).
@Suite("Stolen Device Protection")
struct StolenDeviceProtectionTests {
    private func phone(_ profile: DeviceProfile = .iphone, biometry: Bool = true) throws -> (Device, ManualClock, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-sdp-\(UUID().uuidString)")
        let clock = ManualClock()
        let device = try Device.create(
            at: directory,
            options: DeviceOptions(name: "Phone", passcode: "123456", enrollBiometry: biometry, passcodeHashing: .minimum, profile: profile),
            clock: clock)
        try device.unlock(passcode: "123456")
        return (device, clock, directory)
    }

    private func close(_ device: Device, _ directory: URL) {
        device.powerOff()
        try? FileManager.default.removeItem(at: directory)
    }

    @Test("away from familiar locations, removing the passcode waits an hour of the device's clock; whenPasscodeSet items live until then")
    func passcodeRemovalWaits() throws {
        let (device, clock, directory) = try phone()
        defer { close(device, directory) }
        try device.install(AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID))
        try device.keychain(for: TestDevice.appID).add(.password(account: "vault", protection: .whenPasscodeSetThisDeviceOnly))
        #expect(try device.securitySettings()?.stolenDeviceProtection == .away, "on by default from iOS 26.4")
        try device.setAway(true)
        let held = #expect(throws: DeviceError.self) { try device.removePasscode(current: "123456") }
        #expect(held?.code == .securityDelay && held?.message.contains("60 more minutes") == true, "\(held?.message ?? "")")
        clock.advance(by: 1800)
        #expect(throws: DeviceError.self) { try device.removePasscode(current: "123456") }
        #expect(try device.keychain(for: TestDevice.appID).copy(.password(account: "vault")).count == 1, "still there during the delay")
        clock.advance(by: 1800)
        try device.removePasscode(current: "123456")
        #expect(try !device.passcodeIsSet() && device.securitySettings()?.delaysStarted.isEmpty == true)
    }

    @Test("at a familiar location nothing waits, and coming back ends a delay under way; always makes it wait everywhere")
    func locations() throws {
        let (device, _, directory) = try phone()
        defer { close(device, directory) }
        try device.changeBiometryEnrollment()
        try device.setAway(true)
        #expect(throws: DeviceError.self) { try device.changeBiometryEnrollment() }
        try device.setAway(false)
        try device.changeBiometryEnrollment()
        try device.setStolenDeviceProtection(.always)
        #expect(throws: DeviceError.self) { try device.setPasscode("654321", current: "123456") }
        #expect(throws: DeviceError.self) { try device.setStolenDeviceProtection(.off) }
    }

    @Test("without Face ID it cannot hold anything; iOS 17.3 to 26.3 has it off until turned on; before iOS 17.3 there is none")
    func versions() throws {
        let (bare, _, bareDirectory) = try phone(biometry: false)
        defer { close(bare, bareDirectory) }
        try bare.setAway(true)
        try bare.setPasscode("654321", current: "123456")

        let (ios17, _, ios17Directory) = try phone(.iphoneIOS17)
        defer { close(ios17, ios17Directory) }
        #expect(try ios17.securitySettings()?.stolenDeviceProtection == .off)
        try ios17.setAway(true)
        try ios17.changeBiometryEnrollment()
        try ios17.setStolenDeviceProtection(.away)
        #expect(throws: DeviceError.self) { try ios17.changeBiometryEnrollment() }
        #expect(try ios17.status().security?.delaysStarted.keys.contains(.biometry) == true)

        let (ios16, _, ios16Directory) = try phone(.iphoneIOS16)
        defer { close(ios16, ios16Directory) }
        #expect(try ios16.securitySettings() == nil && ios16.status().security == nil)
        #expect(throws: DeviceError.self) { try ios16.setAway(true) }
        try ios16.setPasscode("654321", current: "123456")
    }
}
