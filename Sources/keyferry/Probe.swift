import Foundation
import GRDB
import KeychainStore
import KeychainModel
struct Probe {
    static func run(_ root: URL) throws {
        let dev = try Device.create(at: root.appendingPathComponent("dev"), options: DeviceOptions(passcodeHashing: .minimum))
        try dev.install(AppManifest(bundleID: "com.x.y", teamID: "ABCDE12345"))
        let kc = try dev.keychain(for: "com.x.y")
        for i in 0..<5000 { try kc.add(NewItem(.genericPassword, attributes: [.account: .string("a\(i)")], data: Data(count: 256))) }
        let s = DispatchTime.now().uptimeNanoseconds
        for r in 0..<20 { for i in 0..<5000 { _ = try kc.copy(ItemQuery(.genericPassword, attributes: [.account: .string("a\(i)"), .service: .string("")], returning: .data)) }; _ = r }
        print("copy", Double(DispatchTime.now().uptimeNanoseconds - s) / 1000 / 100000, "us")
    }
}
