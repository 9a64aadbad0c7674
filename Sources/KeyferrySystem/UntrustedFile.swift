package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Files laid out by someone else (a backup folder): read only when they are regular files,
/// never through a symbolic link, and never waiting on a FIFO or a device. The checks are
/// made on the open descriptor, so nothing swapped in between a check and the read gets read.
package enum UntrustedFile {
    package enum Failure: Error, Sendable, Equatable {
        case missing
        case symbolicLink
        /// A FIFO, socket, device or folder, by its kind's name.
        case notRegular(String)
        case tooLarge(limit: Int)
        case unreadable(String)
    }

    /// The whole file at `path`, at most `limit` bytes.
    package static func read(_ path: String, limit: Int) throws(Failure) -> Data {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR: throw .missing
            case ELOOP: throw .symbolicLink
            default: throw .unreadable(SystemError.reason(errno))
            }
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .unreadable(SystemError.reason(errno)) }
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFREG else { throw .notRegular(name(ofKind: kind)) }
        guard status.st_size <= limit else { throw .tooLarge(limit: limit) }
        var data = Data(count: Int(status.st_size))
        var filled = 0
        // The size may change while it is read: never past the limit, never past what was there.
        while filled < data.count {
            let count = data.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw .unreadable(SystemError.reason(errno)) }
            if count == 0 { break }
            filled += count
        }
        data.removeSubrange(filled...)
        return data
    }

    private static func name(ofKind kind: mode_t) -> String {
        switch kind {
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFDIR: "a folder"
        case S_IFLNK: "a symbolic link"
        default: "not a regular file"
        }
    }
}
