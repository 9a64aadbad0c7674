package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Putting a finished file or directory where it belongs without ever replacing what is
/// there: of several writers racing for one path, exactly one wins and the others are told.
package enum Placement {
    /// Moves a directory to `destination`, which may be missing or an empty directory. rename(2)
    /// fails on a non-empty one; `isOccupied` on the error says that is why.
    package static func moveDirectory(_ source: URL, to destination: URL) throws(SystemError) {
        guard rename(source.path, destination.path) == 0 else { throw .last() }
    }

    /// Moves a file to `destination`, which must be missing. link(2), unlike rename(2), fails
    /// when anything is there; a file system without hard links gets a rename after one more
    /// look. `isOccupied` on the error says something appeared there.
    package static func moveFile(_ source: URL, to destination: URL) throws(SystemError) {
        if link(source.path, destination.path) == 0 {
            unlink(source.path)
            return
        }
        var failure = SystemError.last()
        if failure.code == EPERM || failure.code == EOPNOTSUPP, (try? FileManager.default.attributesOfItem(atPath: destination.path)) == nil {
            if rename(source.path, destination.path) == 0 { return }
            failure = .last()
        }
        throw failure
    }
}
