import Foundation
import KeychainModel
import KeychainStore
import KeychainTesting
import KeyferryCrypto
import Survival
import Testing

/// A phone with one secret of each kind a user asks about, run through every path.
@Suite("The survival matrix")
struct SurvivalTests {
    static let app = AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID)

    static func phone() throws -> TestDevice {
        let phone = try TestDevice(biometry: true)
        let keychain = try phone.keychain()
        try keychain.add(.password(account: "synced", value: "s1", protection: .afterFirstUnlock, synchronizable: true))
        try keychain.add(.password(account: "local", value: "l1", protection: .afterFirstUnlock))
        try keychain.add(.password(account: "bound", value: "b1", protection: .afterFirstUnlockThisDeviceOnly))
        try keychain.add(.password(account: "classA", value: "a1", protection: .whenUnlocked))
        try keychain.add(.password(account: "always", value: "d1", protection: .always))
        try keychain.add(.password(account: "passcodeSet", value: "p1", protection: .whenPasscodeSetThisDeviceOnly))
        var face = NewItem.password(account: "face", value: "f1")
        face.accessControl = try AccessControl(protection: .whenUnlockedThisDeviceOnly, flags: [.biometryCurrentSet])
        try keychain.add(face)
        let sandbox = try phone.device.sandbox(for: TestDevice.appID)
        try sandbox.set("tok", forKey: "token")
        return phone
    }

    static func matrix(_ phone: TestDevice, passcode: String? = TestDevice.defaultPasscode) async throws -> SurvivalMatrix {
        try await Survival.matrix(of: phone.device, options: .init(passcode: passcode, scratch: phone.directory.deletingLastPathComponent()))
    }

    @Test("beside the Simulator: the reads a locked or rebooted phone refuses are its false passes, and what it cannot run is named")
    func simulatorFalsePasses() async throws {
        let phone = try Self.phone()
        let comparison = try await Survival.compareWithSimulator(
            phone.device, options: .init(passcode: TestDevice.defaultPasscode, scratch: phone.directory.deletingLastPathComponent()))
        let passes = Set(comparison.falsePasses.map { "\($0.secret) \($0.path.rawValue)" })
        for expected in [
            "classA @ com.example.app locked-after-grace", "classA @ com.example.app before-first-unlock",
            "local @ com.example.app before-first-unlock", "synced @ com.example.app before-first-unlock",
        ] {
            #expect(passes.contains(expected), "\(expected) in \(passes.sorted())")
        }
        #expect(!passes.contains("always @ com.example.app before-first-unlock"), "an Always item opens before first unlock on both")
        for pass in comparison.falsePasses {
            #expect(pass.device.outcome != .kept && pass.simulator.outcome == .kept)
            #expect(comparison.device.cell(pass.secret, pass.path)?.outcome == pass.device.outcome)
        }
        #expect(comparison.simulator.notRun[.iCloudKeychain] == "the iOS Simulator has no iCloud Keychain")
        #expect(comparison.simulator.notRun[.passcodeRemoved] != nil)
        // No backup or Quick Start on a Simulator: a copy of one keeps everything, so no cell claims otherwise.
        for path in [SurvivalPath.encryptedBackupNewDevice, .unencryptedBackupSameDevice, .quickStart] {
            #expect(comparison.simulator.notRun[path]?.contains("ThisDeviceOnly ones too") == true, "\(path)")
            #expect(comparison.device.notRun[path] == nil)
        }
        #expect(comparison.simulator.rows.count == comparison.device.rows.count)
        #expect(try phone.device.status().profile == .iphone && phone.device.lockState == .unlocked)

        let simulator = try Device.create(
            at: phone.directory.deletingLastPathComponent().appendingPathComponent("sim"),
            options: DeviceOptions(name: "Sim", passcodeHashing: .minimum, profile: .simulator))
        defer { simulator.powerOff() }
        await #expect(throws: DeviceError.self) {
            try await Survival.compareWithSimulator(simulator, options: .init(scratch: phone.directory.deletingLastPathComponent()))
        }
    }

    @Test("an app group's suite and files are rows of their own: kept by backups and a transfer, lost with the app and its widget")
    func appGroups() async throws {
        let group = "group.com.example.shared"
        let phone = try TestDevice(apps: [AppManifest(bundleID: TestDevice.appID, teamID: TestDevice.teamID, accessGroups: [group])])
        try phone.device.install(
            AppManifest(bundleID: "\(TestDevice.appID).widget", teamID: TestDevice.teamID, accessGroups: [group], containingApp: TestDevice.appID))
        let container = try phone.device.groupContainer(group, for: "\(TestDevice.appID).widget")
        try container.set("alice", forKey: "signedInUser")
        try container.writeFile("timeline.json", Data("[]".utf8), protection: .complete)
        let matrix = try await Self.matrix(phone)
        let suite = try #require(matrix.rows.first { $0.name == "\(group) UserDefaults signedInUser" })
        let file = try #require(matrix.rows.first { $0.name == "\(group)/timeline.json" })
        for path in [SurvivalPath.encryptedBackupNewDevice, .unencryptedBackupNewDevice, .quickStart] {
            #expect(suite.cells[path]?.outcome == .kept && file.cells[path]?.outcome == .kept, "\(path)")
        }
        #expect(suite.cells[.appReinstalled]?.outcome == .lost, "the container goes with the last app of its group")
        #expect(suite.cells[.beforeFirstUnlock]?.outcome == .unreadable)
        #expect(file.cells[.lockedAfterGrace]?.outcome == .unreadable && suite.cells[.lockedAfterGrace]?.outcome == .kept)
    }

    @Test("on a Mac, a file-based item is its app's row, open while locked, and told apart from a data protection item of the same key")
    func mac() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-mac-survival-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("device")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let mac = try Device.create(
            at: root, options: DeviceOptions(name: "MacBook", passcode: "123456", passcodeHashing: .minimum, profile: .mac), clock: ManualClock())
        defer { mac.powerOff() }
        try mac.unlock(passcode: "123456")
        try mac.install(Self.app)
        let keychain = try mac.keychain(for: TestDevice.appID)
        try keychain.add(.password(account: "token", value: "file"))
        var classA = NewItem.password(account: "token", value: "dp", protection: .whenUnlocked)
        classA.useDataProtectionKeychain = true
        try keychain.add(classA)
        let matrix = try await Survival.matrix(of: mac, options: .init(passcode: "123456", scratch: directory))
        let rows = matrix.rows.filter { $0.name.hasPrefix("token") }
        #expect(rows.count == 2 && rows.allSatisfy { $0.app == TestDevice.appID }, "\(rows.map(\.name))")
        let file = try #require(rows.first { $0.accessGroup == "file-based keychain of \(TestDevice.appID)" })
        let dataProtection = try #require(rows.first { $0.accessGroup != file.accessGroup })
        #expect(file.cells[.lockedAfterGrace]?.outcome == .kept)
        #expect(dataProtection.cells[.lockedAfterGrace]?.outcome == .unreadable)
        #expect(matrix.notRun[.encryptedBackupNewDevice]?.contains("a Mac") == true)
    }

    @Test("each path keeps, loses or locks what Apple's would, with the reason")
    func everyPath() async throws {
        let phone = try Self.phone()
        let matrix = try await Self.matrix(phone)
        #expect(matrix.paths == SurvivalPath.allCases)
        func outcome(_ name: String, _ path: SurvivalPath) -> SurvivalCell.Outcome? { matrix.cell(name, path)?.outcome }

        #expect(outcome("synced @ com.example.app", .iCloudKeychain) == .kept)
        #expect(outcome("local @ com.example.app", .iCloudKeychain) == .lost)
        #expect(matrix.cell("local @ com.example.app", .iCloudKeychain)?.reason?.hasPrefix("not synchronizable") == true)
        #expect(outcome("UserDefaults token", .iCloudKeychain) == .lost)

        #expect(outcome("local @ com.example.app", .encryptedBackupNewDevice) == .kept)
        #expect(outcome("bound @ com.example.app", .encryptedBackupNewDevice) == .lost)
        #expect(matrix.cell("bound @ com.example.app", .encryptedBackupNewDevice)?.reason?.hasPrefix("device-bound") == true)
        #expect(outcome("local @ com.example.app", .unencryptedBackupNewDevice) == .lost)
        #expect(matrix.cell("local @ com.example.app", .unencryptedBackupNewDevice)?.reason?.hasPrefix("unencrypted archive") == true)
        #expect(outcome("UserDefaults token", .unencryptedBackupNewDevice) == .kept)
        #expect(outcome("bound @ com.example.app", .unencryptedBackupSameDevice) == .kept)
        #expect(outcome("bound @ com.example.app", .encryptedBackupSameDevice) == .kept)
        #expect(outcome("passcodeSet @ com.example.app", .encryptedBackupSameDevice) == .lost)

        #expect(outcome("local @ com.example.app", .quickStart) == .kept)
        #expect(outcome("bound @ com.example.app", .quickStart) == .lost)

        #expect(outcome("passcodeSet @ com.example.app", .passcodeRemoved) == .lost)
        #expect(matrix.cell("passcodeSet @ com.example.app", .passcodeRemoved)?.reason == "deleted with the passcode (WhenPasscodeSetThisDeviceOnly)")
        #expect(outcome("local @ com.example.app", .passcodeRemoved) == .kept)

        let face = try #require(matrix.cell("face @ com.example.app", .biometryReenrolled))
        #expect(face.outcome == .unreadable)
        #expect(face.status == .authFailed)
        #expect(face.reason == "biometryCurrentSet invalidated by re-enrolment")
        #expect(outcome("local @ com.example.app", .biometryReenrolled) == .kept)

        #expect(outcome("local @ com.example.app", .appTransferred) == .lost)
        #expect(matrix.cell("local @ com.example.app", .appTransferred)?.reason?.hasPrefix("access group of the old team") == true)
        #expect(outcome("UserDefaults token", .appTransferred) == .kept)
        #expect(outcome("local @ com.example.app", .appReinstalled) == .kept)
        #expect(outcome("UserDefaults token", .appReinstalled) == .lost)

        #expect(outcome("always @ com.example.app", .beforeFirstUnlock) == .kept)
        let beforeUnlock = try #require(matrix.cell("local @ com.example.app", .beforeFirstUnlock))
        #expect(beforeUnlock.outcome == .unreadable && beforeUnlock.status == .interactionNotAllowed)
        #expect(outcome("UserDefaults token", .beforeFirstUnlock) == .unreadable)

        #expect(outcome("local @ com.example.app", .lockedAfterGrace) == .kept)
        #expect(matrix.cell("classA @ com.example.app", .lockedAfterGrace)?.status == .interactionNotAllowed)
        // Every loss and every unreadable cell says why.
        for row in matrix.rows {
            for (path, cell) in row.cells where cell.outcome != .kept {
                #expect(cell.reason?.isEmpty == false, "\(row.name) on \(path.rawValue)")
            }
        }
    }

    @Test(
        "a Secure Enclave key stays on its device: lost to every backup, transfer and restore elsewhere, with the reason; a software key of the same class moves"
    )
    func secureEnclaveKey() async throws {
        let phone = try TestDevice()
        let keychain = try phone.keychain()
        // Of a class that migrates, so that only the token decides.
        try keychain.add(.ellipticCurveKey(label: "enclave key", secureEnclave: true))
        try keychain.add(.ellipticCurveKey(label: "software key", secureEnclave: false))
        let matrix = try await Self.matrix(phone)
        for path in [SurvivalPath.encryptedBackupNewDevice, .encryptedBackupSameDevice, .quickStart] {
            let cell = try #require(matrix.cell("enclave key", path))
            #expect(cell.outcome == .lost, "\(path.rawValue)")
            #expect(cell.reason == NeverExported.secureEnclave.sentence, "\(path.rawValue)")
            #expect(matrix.cell("software key", path)?.outcome == .kept, "\(path.rawValue)")
        }
        #expect(matrix.cell("enclave key", .iCloudKeychain)?.reason == NeverExported.secureEnclave.sentence)
        #expect(matrix.cell("enclave key", .appReinstalled)?.outcome == .kept, "the keychain outlives the app")

        var synced = NewItem.ellipticCurveKey(label: "synced enclave key", secureEnclave: true)
        synced.synchronizable = true
        #expect(throws: KeychainError.self) { try keychain.add(synced) }
        let enclave = ItemQuery(.key, attributes: [.label: .string("enclave key")], matchLimit: .one)
        #expect(throws: KeychainError.self, "made synchronizable later") { try keychain.update(enclave, with: ItemChanges(synchronizable: true)) }
    }

    @Test("a secret the device itself cannot read (biometryCurrentSet after a new face) is unreadable now and on every path it stays on, never kept")
    func unreadableBaseline() async throws {
        let phone = try Self.phone()
        try phone.device.changeBiometryEnrollment()
        let matrix = try await Self.matrix(phone)
        let row = try #require(matrix.rows.first { $0.name == "face @ com.example.app" })
        let now = try #require(row.now)
        #expect(now.outcome == .unreadable && now.status == .authFailed)
        for (path, cell) in row.cells {
            #expect(cell.outcome != .kept, "\(path.rawValue) calls it kept")
            if cell.status == now.status { #expect(cell.reason == now.reason, "\(path.rawValue): \(cell.reason ?? "")") }
        }
        #expect(row.cells[.lockedAfterGrace]?.outcome == .unreadable)
        #expect(matrix.rows.first { $0.name == "local @ com.example.app" }?.now == nil)
    }

    @Test("the device is left byte for byte as it was, and the scratch devices are gone")
    func untouched() async throws {
        let phone = try Self.phone()
        let before = try phone.allBytesOnDisk()
        let scratchBefore = try FileManager.default.contentsOfDirectory(atPath: phone.directory.deletingLastPathComponent().path)
        _ = try await Self.matrix(phone, passcode: nil)
        let after = try phone.allBytesOnDisk()
        #expect(before.map(\.path) == after.map(\.path))
        // SQLite's -shm is its WAL index in shared memory, rewritten by reads (their read marks):
        // a cache of the WAL, not the device's data.
        #expect(zip(before, after).filter { $0.bytes != $1.bytes && !$0.path.hasSuffix("-shm") }.map(\.0.path) == [])
        #expect(try FileManager.default.contentsOfDirectory(atPath: phone.directory.deletingLastPathComponent().path) == scratchBefore)
        #expect(phone.device.lockState == .unlocked)
    }

    @Test("a locked device with its passcode: the matrix reads an unlocked copy, the device stays locked, and a wrong passcode counts on it")
    func lockedWithPasscode() async throws {
        let phone = try Self.phone()
        try phone.device.lock(immediately: true)
        let whileLocked = try await Self.matrix(phone)
        #expect(phone.device.lockState == .locked)
        #expect(whileLocked.rows.first { $0.name == "classA @ com.example.app" }?.now == nil, "read now, from the unlocked copy")
        await #expect(throws: KeychainError.self) { try await Self.matrix(phone, passcode: "000000") }
        #expect(try phone.device.status().failedPasscodeAttempts == 1, "the guess counted on the device")
        // The same cells as the matrix of the device unlocked.
        try phone.device.unlock(passcode: TestDevice.defaultPasscode)
        let unlocked = try await Self.matrix(phone)
        func outcomes(_ matrix: SurvivalMatrix) -> [String] {
            matrix.rows.flatMap { row in matrix.paths.map { "\(row.name) \($0.rawValue) \(row.cells[$0]?.outcome.rawValue ?? "-")" } }
        }
        #expect(outcomes(whileLocked) == outcomes(unlocked))
    }

    @Test("without the passcode, a copy still loses what the passcode's removal destroys")
    func passcodeUnknown() async throws {
        let phone = try Self.phone()
        let matrix = try await Self.matrix(phone, passcode: nil)
        #expect(matrix.cell("passcodeSet @ com.example.app", .passcodeRemoved)?.outcome == .lost)
        #expect(matrix.cell("local @ com.example.app", .passcodeRemoved)?.outcome == .kept)
    }

    @Test("without the passcode, its owner still answers a prompt with it: an item biometry or the passcode opens is kept after a new face")
    func passcodeUnknownButTyped() async throws {
        let phone = try Self.phone()
        var either = NewItem.password(account: "either", value: "e1")
        either.accessControl = try AccessControl(protection: .whenUnlockedThisDeviceOnly, expression: "biometryCurrentSet|or|devicePasscode")
        try phone.keychain().add(either)
        let matrix = try await Self.matrix(phone, passcode: nil)
        for path in [SurvivalPath.biometryReenrolled, .appReinstalled] {
            #expect(
                matrix.cell("either @ com.example.app", path)?.outcome == .kept, "\(path): \(String(describing: matrix.cell("either @ com.example.app", path)))"
            )
        }
        #expect(matrix.cell("face @ com.example.app", .biometryReenrolled)?.outcome == .unreadable, "biometry alone still fails")
        #expect(matrix.cell("passcodeSet @ com.example.app", .passcodeRemoved)?.outcome == .lost)
    }

    @Test("paths that cannot happen are named, not run")
    func notRun() async throws {
        let phone = try TestDevice(passcode: nil)
        try phone.keychain().add(.password(account: "a"))
        let matrix = try await Self.matrix(phone, passcode: nil)
        #expect(matrix.notRun[.passcodeRemoved] == "the device has no passcode to remove")
        #expect(matrix.notRun[.biometryReenrolled] != nil)
        #expect(!matrix.paths.contains(.passcodeRemoved))
        #expect(matrix.cell("a @ com.example.app", .beforeFirstUnlock)?.outcome == .kept)
    }

    @Test("a locked device without its passcode and an unknown app are refused, naming the fix")
    func refusals() async throws {
        let phone = try Self.phone()
        try phone.device.lock(immediately: true)
        await #expect { try await Self.matrix(phone, passcode: nil) } throws: { error in
            (error as? DeviceError)?.message.contains("unlock it first, or give its passcode") == true
        }
        try phone.device.unlock(passcode: TestDevice.defaultPasscode)
        await #expect {
            try await Survival.matrix(of: phone.device, options: .init(app: "com.example.none", scratch: phone.directory.deletingLastPathComponent()))
        } throws: { error in
            (error as? DeviceError)?.code == .appNotInstalled
        }
    }
}
