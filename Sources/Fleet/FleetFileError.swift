package import KeychainModel

/// A fleet file that cannot be used, located the way a compiler locates an error:
/// `Peers/family.yaml:12:15: devices.phone.biometry: expected true or false, found "often".`
package struct FleetFileError: CodedError, Equatable {
    package static let domain = "file"

    package enum Code: String, Sendable, Codable {
        /// There is no such file.
        case noSuchFile
        /// The file is there and cannot be read (a directory, unreadable, too large, not text).
        case unreadable
        /// The file reads and says something wrong: bad YAML, an unknown field, a wrong value.
        case malformed
    }

    package var code: Code
    /// The file as the user named it.
    package var file: String
    /// 1-based; nil when the whole file is at fault (unreadable).
    package var line: Int?
    package var column: Int?
    /// The dotted path of the field at fault (`devices.phone.passcode`); nil for a YAML syntax
    /// error or a problem of the whole file.
    package var field: String?
    package var problem: String

    package init(_ code: Code = .malformed, file: String, line: Int? = nil, column: Int? = nil, field: String? = nil, problem: String) {
        self.code = code
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.problem = problem
    }

    package var kind: ProblemKind { code == .noSuchFile ? .notFound : .invalidInput }

    package var message: String { description }

    package var description: String {
        var location = file
        if let line {
            location += ":\(line)"
            if let column { location += ":\(column)" }
        }
        return "\(location): " + (field.map { "\($0): " } ?? "") + problem
    }
}

/// Every mistake found in one file, when there is more than one: a file is checked whole, so
/// that one pass fixes them all.
package struct FleetFileErrors: Error {
    package var errors: [FleetFileError]

    /// Enough to fix in one pass; a file of nothing but mistakes does not flood the terminal.
    package static let shown = 20

    /// Throws what `errors` holds: nothing, the one error, or all of them.
    package static func throwIfAny(_ errors: [FleetFileError]) throws {
        if errors.count == 1 { throw errors[0] }
        if errors.count > 1 { throw FleetFileErrors(errors: Array(errors.prefix(shown))) }
    }
}
