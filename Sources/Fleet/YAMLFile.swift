package import Foundation
import Yams

/// Reading a fleet or scenario file a user names: bounded in size, UTF-8, and never quoted back
/// (a file named by mistake, a token or a credential, must not end up in an error or a CI log).
package enum YAMLFile {
    /// Far above any fleet or scenario a person writes; keeps reading and parsing bounded.
    package static let maximumBytes = 1 << 20

    /// The file's text. `kind` names it in errors: "fleet file", "scenario file".
    package static func text(of url: URL, file: String, kind: String) throws -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw FleetFileError(.noSuchFile, file: file, problem: "cannot read the \(kind): there is no such file.")
        }
        guard !isDirectory.boolValue else { throw FleetFileError(.unreadable, file: file, problem: "cannot read the \(kind): it is a directory.") }
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            data = try handle.read(upToCount: maximumBytes + 1) ?? Data()
        } catch {
            throw FleetFileError(.unreadable, file: file, problem: "cannot read the \(kind) (\(error.localizedDescription)).")
        }
        guard data.count <= maximumBytes else {
            throw FleetFileError(.unreadable, file: file, problem: "larger than \(maximumBytes >> 20) MiB; a \(kind) is a short YAML document.")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw FleetFileError(.unreadable, file: file, problem: "not UTF-8 text; a \(kind) is YAML.")
        }
        return text
    }

    /// The document's top level, which must be a mapping: anything else is refused without
    /// quoting what was found.
    package static func top(_ text: String, file: String, kind: String, needs: String) throws -> YAMLField {
        guard let document = try YAMLField.document(text, file: file) else {
            throw FleetFileError(file: file, line: 1, problem: "the file is empty; a \(kind) needs \(needs).")
        }
        guard document.node.mapping != nil else {
            throw FleetFileError(file: file, line: 1, problem: "not a \(kind): its top level is not a mapping with \(needs).")
        }
        return document
    }
}
