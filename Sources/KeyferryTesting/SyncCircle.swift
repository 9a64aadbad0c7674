import Foundation
public import KeychainModel
import KeychainStore  // a device's info, named by no type here
import Relay
import Sync

/// Simulated devices in one iCloud Keychain circle, through a relay in this process: only
/// synchronizable, non-ThisDeviceOnly items without access control travel, as on iOS.
///
///     let circle = try await SyncCircle([phone, ipad])
///     try app.run { try store.save(token, synchronizable: true) }
///     try await circle.sync()
///     ipad.app("com.example.notes").run { ... }     // the token is there
public final class SyncCircle: Sendable {
    public let devices: [SimulatedDevice]
    private let engines: [SyncEngine]

    /// The first device creates the circle; it vouches for each of the others, which join.
    public init(_ devices: [SimulatedDevice]) async throws {
        guard let first = devices.first else { throw CircleError(.noDevices, "a circle needs at least one device") }
        let storage = try SQLiteRelayStorage(directory: first.directory.deletingLastPathComponent().appendingPathComponent("relay-\(UUID().uuidString)"))
        let transport = LocalRelay(storage: storage)
        let sponsor = try await SyncEngine.create(
            device: first.device, name: first.device.info.name,
            relay: URL(string: "local:keyferry-testing")!, transport: transport)
        var engines = [sponsor]
        for device in devices.dropFirst() {
            let voucher = try await sponsor.vouch(for: try SyncEngine.peerIdentity(of: device.device, name: device.device.info.name))
            engines.append(try await SyncEngine.join(voucher, device: device.device, transport: transport))
        }
        self.devices = devices
        self.engines = engines
    }

    /// Every member pushes and pulls, round after round, until nothing moves (or, after 100
    /// rounds, the circle throws: something keeps changing).
    public func sync() async throws {
        for _ in 0..<100 {
            var moved = 0
            for engine in engines {
                let report = try await engine.sync()
                moved += report.pushed + report.applied
            }
            if moved == 0 { return }
        }
        throw CircleError(.didNotSettle, "the circle still moved items after 100 rounds of sync")
    }
}

extension CodedFailure.Code where Domain == CircleErrorDomain {
    /// A `SyncCircle` of no devices.
    public static var noDevices: Self { Self(rawValue: "noDevices") }
    /// `sync()` gave up: the members still exchanged items after 100 rounds.
    public static var didNotSettle: Self { Self(rawValue: "didNotSettle") }
}
