import Foundation
import KeychainModel
import KeyferrySecurity

/// How items look on the command line: a headline, a block of attributes, or JSON values.
extension ItemRecord {
    /// `genericPassword  ABCDE12345.com.example.mail  whenUnlocked  account=alice service=mail`
    var headline: String {
        var parts = [itemClass.name, accessGroup.escapingControlCharacters]
        // A Mac's file-based keychain has no protection classes: its items open once the user has logged in.
        if macKeychain != .fileBased { parts.append(protection.name) }
        if synchronizable { parts.append("sync") }
        if let accessControl, !accessControl.expression.isEmpty { parts.append("[\(accessControl.expression)]") }
        let shown = attributes.map { (name: $0.key.name(in: itemClass), key: $0.key, value: $0.value) }.sorted { $0.name < $1.name }
            .filter { !($0.value == .empty(of: $0.value.kind) && itemClass.primaryKey.contains($0.key)) }
            .map { "\($0.name)=\($0.value.shown(as: $0.key))" }
        let summary = subjectSummary.map { ["subjectSummary=\($0.escapingControlCharacters)"] } ?? []
        return (parts + shown + summary).joined(separator: "  ")
    }

    /// A certificate's subject as SecCertificateCopySubjectSummary gives it (`api.example.com`),
    /// beside the DER that `--attr subject=hex:` matches.
    var subjectSummary: String? {
        guard itemClass == .certificate, case .data(let der)? = attributes[.subject] else { return nil }
        return SecCertificate.summary(ofSubject: der)
    }

    /// The headline, then (when asked) the secret as text, or its size when it is not UTF-8.
    func described(withData: Bool) -> String {
        guard withData, let data else { return headline }
        let text = String(data: data, encoding: .utf8).map { "data: \($0.escapingControlCharacters)" } ?? "data: <\(data.count) bytes; use --json for base64>"
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
            "attributes": Dictionary(uniqueKeysWithValues: attributes.map { ($0.key.name(in: itemClass), $0.value.json(as: $0.key)) }),
        ]
        if let accessControl { out["accessControl"] = accessControl.expression }
        if let subjectSummary { out["subjectSummary"] = subjectSummary }
        if macKeychain == .fileBased { (out["keychain"], out["accessible"]) = ("file-based", nil) }
        if withData, let data {
            out["data"] = data.base64EncodedString()
            if let text = String(data: data, encoding: .utf8) { out["text"] = text }
        }
        return out
    }
}

extension AttributeKey {
    /// Apple's name on this class: `kSecAttrType` is `keyType` on a key.
    func name(in itemClass: ItemClass) -> String { itemClass == .key && self == .type ? "keyType" : name }
}

extension AttributeValue {
    /// For JSON: data as `base64:...` (the form `--attr` takes), so it is not taken for text.
    /// Apple's named values by name, as text shows them (`kSecAttrKeyTypeRSA`).
    func json(as key: AttributeKey) -> Any {
        switch self {
        case .string(let s): s
        case .data(let d): "base64:" + d.base64EncodedString()
        case .number(let n): NamedNumbers.name(of: n, for: key) ?? n
        case .bool(let b): b
        case .date(let d): d.formatted(.iso8601)
        }
    }

    /// As `--attr` takes it back, on one line: text with its control characters escaped; data
    /// as its text when that is printable UTF-8, else `hex:`, and always `hex:` in a blob
    /// attribute (an account stored as data), so it is not taken for a string; Apple's named
    /// values by name (`kSecAttrKeyTypeRSA`; a protocol as `--protocol` takes it, `HTTPS`).
    func shown(as key: AttributeKey) -> String {
        switch self {
        case .string(let code) where key == .protocol:
            InternetProtocol.all.first { $0.code == code }.map(\.name) ?? code.escapingControlCharacters
        case .string(let s): s.escapingControlCharacters
        case .data(let d) where key.isBlob: "hex:" + Hex.encode(d)
        case .data(let d):
            String(data: d, encoding: .utf8).flatMap { $0.escapingControlCharacters == $0 && !$0.hasPrefix("hex:") && !$0.hasPrefix("base64:") ? $0 : nil }
                ?? "hex:" + Hex.encode(d)
        case .number(let n): NamedNumbers.name(of: n, for: key) ?? "\(n)"
        default: "\(json(as: key))"
        }
    }
}

/// Apple's named values of numeric attributes, as app code spells them, both ways.
enum NamedNumbers {
    static let byName: [String: (key: AttributeKey, value: Int64)] = [
        "kSecAttrKeyTypeRSA": (.type, 42), "kSecAttrKeyTypeECSECPrimeRandom": (.type, 73),
        "kSecAttrKeyClassPublic": (.keyClass, 0), "kSecAttrKeyClassPrivate": (.keyClass, 1), "kSecAttrKeyClassSymmetric": (.keyClass, 2),
    ]

    static func name(of value: Int64, for key: AttributeKey) -> String? {
        byName.first { $0.value.key == key && $0.value.value == value }?.key
    }
}
