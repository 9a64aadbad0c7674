package import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension FileHandle {
    /// A file opened for appending whole records (`O_APPEND`): every process writing to it adds
    /// after what is there, and none overwrites another's lines. Created, its owner's alone.
    package static func appending(to file: URL) throws(SystemError) -> FileHandle {
        let descriptor = open(file.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .last("cannot open \(file.path)") }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }
}
