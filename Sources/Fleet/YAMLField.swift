package import Foundation
import KeychainModel
import KeychainStore
package import Yams

/// A node of a parsed YAML document together with where it is: its dotted field path and its
/// line, so that every complaint about it can name both.
package struct YAMLField {
    package let node: Yams.Node
    package let path: String
    package let file: String
    /// The key this node is the value of, when it is one: complaints about the name itself
    /// point there.
    var key: Yams.Node? = nil

    package init(node: Yams.Node, path: String, file: String, key: Yams.Node? = nil) {
        self.node = node
        self.path = path
        self.file = file
        self.key = key
    }

    /// Parses `text`; a syntax error comes back located.
    package static func document(_ text: String, file: String) throws -> YAMLField? {
        do {
            return try Yams.compose(yaml: text).map { YAMLField(node: $0, path: "", file: file) }
        } catch let error as YamlError {
            throw located(error, file: file)
        }
    }

    package func failure(_ problem: String) -> FleetFileError {
        FleetFileError(file: file, line: node.mark?.line, column: node.mark?.column, field: path.isEmpty ? nil : path, problem: problem)
    }

    /// A complaint about this entry's name, located at the key.
    package func keyFailure(_ problem: String) -> FleetFileError {
        let mark = (key ?? node).mark
        return FleetFileError(file: file, line: mark?.line, column: mark?.column, field: path.isEmpty ? nil : path, problem: problem)
    }

    /// Runs a check that throws `DeviceError`, and locates its complaint at this field (or at
    /// its key, when the name is what is checked).
    package func check(atKey: Bool = false, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as DeviceError {
            throw atKey ? keyFailure(error.message) : failure(error.message)
        }
    }

    /// The entries of a mapping, in file order, refusing keys outside `allowed`.
    package func entries(allowed: [String]? = nil) throws -> [(key: String, value: YAMLField)] {
        guard let mapping = node.mapping else { throw failure("expected a mapping of names to values, found \(kind).") }
        return try mapping.map { key, value in
            let name = key.scalar?.string ?? ""
            let field = YAMLField(node: value, path: path.isEmpty ? name : "\(path).\(name)", file: file, key: key)
            guard !name.isEmpty else { throw field.keyFailure("expected a name as the key.") }
            if let allowed, !allowed.contains(name) {
                let guess = Spelling.closest(to: name, among: allowed).map { "did you mean \($0)? " } ?? ""
                throw field.keyFailure("unknown field; \(guess)expected one of: \(allowed.joined(separator: ", ")).")
            }
            return (name, field)
        }
    }

    /// The entries of a mapping by name, for fixed fields.
    package func fields(allowed: [String]) throws -> [String: YAMLField] {
        Dictionary(uniqueKeysWithValues: try entries(allowed: allowed).map { ($0.key, $0.value) })
    }

    /// Text, however the YAML typed it: a passcode written as `123456` is the text "123456".
    package func text() throws -> String {
        guard let scalar = node.scalar else { throw failure("expected text, found \(kind).") }
        if scalar.style == .plain, node.null != nil { throw failure("expected text, found nothing.") }
        return scalar.string
    }

    package func bool() throws -> Bool {
        guard let value = node.bool, node.scalar?.style == .plain else {
            throw failure("expected true or false, found \(kind).")
        }
        return value
    }

    package func number() throws -> Double {
        guard node.scalar?.style == .plain, let value = node.float, value.isFinite else {
            throw failure("expected a number, found \(kind).")
        }
        return value
    }

    /// A span of time as every Keyferry input writes it: `90s`, `10m`, `1h30m` (a bare number is
    /// seconds).
    package func duration() throws -> TimeInterval {
        let text = try text()
        var seconds: TimeInterval = 0
        try check { seconds = try AdvancingClock.seconds(in: text) }
        return seconds
    }

    /// A list of text, or a single text standing for a list of one.
    package func texts() throws -> [String] {
        if node.scalar != nil { return [try text()] }
        guard let sequence = node.sequence else { throw failure("expected a list, found \(kind).") }
        return try sequence.enumerated().map { index, element in
            try YAMLField(node: element, path: "\(path)[\(index)]", file: file).text()
        }
    }

    /// How a complaint describes what it found.
    package var kind: String {
        switch node {
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .scalar(let scalar): scalar.string.isEmpty ? "nothing" : "\"\(scalar.string)\""
        case .alias: "an alias"
        }
    }

    private static func located(_ error: YamlError, file: String) -> FleetFileError {
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _), let .composer(context, problem, mark, _):
            let detail = [context?.text, problem].compactMap { $0 }.joined(separator: " ")
            return FleetFileError(file: file, line: mark.line, column: mark.column, problem: "not valid YAML: \(detail).")
        case let .duplicatedKeysInMapping(duplicates, context):
            let names = duplicates.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return FleetFileError(file: file, line: context.mark.line, column: context.mark.column, problem: "\(names) appears twice in one mapping.")
        case let .reader(problem, _, _, _):
            return FleetFileError(file: file, problem: "not readable as YAML text: \(problem).")
        default:
            return FleetFileError(file: file, problem: "not valid YAML: \(error).")
        }
    }
}
