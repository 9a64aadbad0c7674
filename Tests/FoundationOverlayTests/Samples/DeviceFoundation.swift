// The one file an app's module adds so that its unchanged `UserDefaults.standard`,
// `FileManager.default` and `Data.write(to:options:)` act on the simulated device: a module's
// own names shadow Foundation's for every file in it (docs/swift.md).
#if canImport(KeyferrySecurity)
import KeyferrySecurity
import Foundation

typealias UserDefaults = DeviceUserDefaults
typealias FileManager = DeviceFileManager

extension Data {
    func write(to url: URL, options: Data.WritingOptions = []) throws {
        try DeviceFiles.write(self, to: url, options: options)
    }
}
#endif
