import Foundation
import KeychainModel

/// How items look on the command line: a headline, a block of attributes, or JSON values.
extension ItemRecord {
    /// `genericPassword  ABCDE12345.com.example.mail  whenUnlocked  account=alice service=mail`
    var headline: String {
        var parts = [itemClass.name, accessGroup, protection.name]
        if synchronizable { parts.append("sync") }
        if let accessControl, !accessControl.expression.isEmpty { parts.append("[\(accessControl.expression)]") }
        let shown = attributes.sorted { $0.key.name < $1.key.name }
            .filter { !($0.value == .empty(of: $0.value.kind) && itemClass.primaryKey.contains($0.key)) }
            .map { "\($0.key.name)=\($0.value.shown(as: $0.key))" }
        return (parts + shown).joined(separator: "  ")
    }

    /// The headline, then (when asked) the secret as text, or its size when it is not UTF-8.
    func described(withData: Bool) -> String {
        guard withData, let data else { return headline }
        let text = String(data: data, encoding: .utf8).map { "data: \($0)" } ?? "data: <\(data.count) bytes; use --json for base64>"
        return headline + "\n" + text
    }

    /// Plain JSON values: attributes by Apple's names; data as base64, and as text when UTF-8.
    func presented(withData: Bool) -> [String: Any] {
        var out: [String: Any] = [
            "class": itemClass.name,
            "uuid": uuid.uuidString,
            "accessGroup": accessGroup,
            "accessible": protection.name,
            "synchronizable": synchronizable,
            "creationDate": creationDate.formatted(.iso8601),
            "modificationDate": modificationDate.formatted(.iso8601),
            "persistentRef": persistentReference.data.base64EncodedString(),
            "attributes": Dictionary(uniqueKeysWithValues: attributes.map { ($0.key.name, $0.value.json) }),
        ]
        if let accessControl { out["accessControl"] = accessControl.expression }
        if withData, let data {
            out["data"] = data.base64EncodedString()
            if let text = String(data: data, encoding: .utf8) { out["text"] = text }
        }
        return out
    }
}

extension AttributeValue {
    var json: Any {
        switch self {
        case .string(let s): s
        case .data(let d): d.base64EncodedString()
        case .number(let n): n
        case .bool(let b): b
        case .date(let d): d.formatted(.iso8601)
        }
    }

    /// As `--attr` takes it back: data as its text when it is UTF-8, else `hex:`; but always
    /// `hex:` in a blob attribute (an account stored as data), so it is not taken for a string.
    func shown(as key: AttributeKey) -> String {
        switch self {
        case .data(let d) where key.isBlob: "hex:" + Hex.encode(d)
        case .data(let d): String(data: d, encoding: .utf8) ?? "hex:" + Hex.encode(d)
        default: "\(json)"
        }
    }
}
