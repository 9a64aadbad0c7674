import Foundation
import KeychainModel
package import KeychainStore
import KeyferryThreads

/// The same secrets on the device and on the iOS Simulator: every cell where the Simulator keeps
/// a secret that the device loses or cannot read. Those are the false passes of a test suite run
/// on the Simulator alone, which CI never sees.
package struct SurvivalComparison: Codable, Sendable {
    package var device: SurvivalMatrix
    package var simulator: SurvivalMatrix
    package var falsePasses: [FalsePass]

    package struct FalsePass: Codable, Sendable, Equatable {
        /// The secret, as the matrices name it, and the app it is read as.
        package var secret: String
        package var app: String?
        package var path: SurvivalPath
        /// What the path does to it on the device: lost or unreadable, and why.
        package var device: SurvivalCell
        /// What it does on the Simulator: kept.
        package var simulator: SurvivalCell
    }

    /// Compares two matrices of the same secrets, matching rows by kind, name, app and group.
    package init(device: SurvivalMatrix, simulator: SurvivalMatrix) {
        self.device = device
        self.simulator = simulator
        let onSimulator = Dictionary(simulator.rows.map { ($0.identity, $0) }) { first, _ in first }
        falsePasses = device.rows.flatMap { row -> [FalsePass] in
            guard let twin = onSimulator[row.identity] else { return [] }
            return device.paths.compactMap { path in
                guard let phone = row.cells[path], phone.outcome != .kept, let sim = twin.cells[path], sim.outcome == .kept else { return nil }
                return FalsePass(secret: row.name, app: row.app, path: path, device: phone, simulator: sim)
            }
        }
    }
}

extension SurvivalRow {
    /// What names the same secret on two devices.
    fileprivate var identity: String { [kind.rawValue, name, app ?? "", accessGroup ?? "", itemClass ?? ""].joined(separator: "\u{1f}") }
}

extension Survival {
    /// The matrix of `device` beside that of its Simulator twin (`Device.simulatorTwin`: the same
    /// items, apps and files, under no passcode), and every false pass between them. `device`
    /// must be unlocked, or `options.passcode` given.
    package static func compareWithSimulator(_ device: Device, options: Options) async throws -> SurvivalComparison {
        guard device.info.profile != .simulator else {
            throw DeviceError(
                .invalidArgument, "\(device.info.name) is an iOS Simulator already; compare a device of another profile with the Simulator.")
        }
        let phone = try await matrix(of: device, options: options)
        let directory = options.scratch.appendingPathComponent("simulator-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: options.scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let passcode = try device.passcodeIsSet() && device.lockState != .unlocked ? options.passcode : nil
        let twin = try await device.longJob { device, _ in try device.simulatorTwin(at: directory, unlockingWith: passcode) }
        defer {
            twin.powerOff()
            try? FileManager.default.removeItem(at: directory)
        }
        var simulatorOptions = options
        simulatorOptions.passcode = nil
        return SurvivalComparison(device: phone, simulator: try await matrix(of: twin, options: simulatorOptions))
    }
}
