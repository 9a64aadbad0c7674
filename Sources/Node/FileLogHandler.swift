package import Foundation
import KeychainModel
import KeyferrySystem
import KeyferryThreads
package import Logging

/// Appends one line per message to a log file (a node's, the relay's): timestamp, level,
/// message, metadata. Control characters are escaped, so that text from outside (a relay's
/// refusal, a member's name) can never forge a line.
package struct FileLogHandler: LogHandler {
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    private let file: SharedFile

    package init(url: URL) {
        file = SharedFile.open(url)
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let details = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let stamp = Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        file.append("\(stamp) \(event.level) \("\(event.message)\(details)".escapingControlCharacters)\n")
    }

    /// One handle per log file, shared by every logger of the process.
    final class SharedFile: Sendable {
        private let handle: Locked<FileHandle?>
        private init(_ handle: FileHandle?) { self.handle = Locked(handle) }

        private static let opened = Locked<[URL: SharedFile]>([:])

        static func open(_ url: URL) -> SharedFile {
            opened.withLock { files in
                if let file = files[url] { return file }
                // Appended to (O_APPEND), as the launcher's redirect of the process's standard
                // error is: neither overwrites the other's lines.
                let file = SharedFile(try? FileHandle.appending(to: url))
                files[url] = file
                return file
            }
        }

        func append(_ line: String) {
            handle.withLock { try? $0?.write(contentsOf: Data(line.utf8)) }
        }
    }
}
