public import Foundation

/// The value of one attribute.
public enum AttributeValue: Hashable, Sendable, CustomStringConvertible {
    case string(String)
    case data(Data)
    case number(Int64)
    case bool(Bool)
    case date(Date)

    public var kind: AttributeKey.Kind {
        switch self {
        case .string: .string
        case .data: .data
        case .number: .number
        case .bool: .bool
        case .date: .date
        }
    }

    /// The value a missing primary-key attribute takes: "" or 0, as on Apple's keychain.
    public static func empty(of kind: AttributeKey.Kind) -> AttributeValue {
        switch kind {
        case .string: .string("")
        case .data: .data(Data())
        case .number: .number(0)
        case .bool: .bool(false)
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        }
    }

    /// A fixed byte encoding (kind byte, then the value), the input of keyed hashes and of the
    /// attribute codec. Numbers and dates are little-endian; dates are seconds since 2001.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = [kind.rawValue]
        switch self {
        case .string(let s): out.append(contentsOf: s.utf8)
        case .data(let d): out.append(contentsOf: d)
        case .number(let n): withUnsafeBytes(of: n.littleEndian) { out.append(contentsOf: $0) }
        case .bool(let b): out.append(b ? 1 : 0)
        case .date(let d):
            withUnsafeBytes(of: d.timeIntervalSinceReferenceDate.bitPattern.littleEndian) { out.append(contentsOf: $0) }
        }
        return out
    }

    /// A string, or data that is UTF-8 text: how a blob attribute such as the account reads
    /// as a name.
    public var text: String? {
        switch self {
        case .string(let s): s
        case .data(let d): String(data: d, encoding: .utf8)
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .string(let s): s
        case .data(let d): "<\(d.count) bytes>"
        case .number(let n): String(n)
        case .bool(let b): String(b)
        case .date(let d): d.formatted(.iso8601)
        }
    }
}

/// Class attributes of an item or a query, by key.
public typealias Attributes = [AttributeKey: AttributeValue]

extension ItemClass {
    /// Checks that every attribute exists for this class (`errSecNoSuchAttr`) and holds the
    /// right kind of value (`errSecParam`).
    public func validate(_ attributes: Attributes) throws(KeychainError) {
        let allowed = self.attributes
        // Every call passes here: sort (so the error names the same attribute each time) only
        // once something is wrong.
        guard attributes.contains(where: { key, value in !allowed.contains(key) || !key.accepts(value) }) else { return }
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            guard allowed.contains(key), let kind = key.kind else {
                throw KeychainError(.noSuchAttr, "\(name) items have no attribute '\(key)'.")
            }
            guard key.accepts(value) else {
                throw KeychainError(.param, "attribute '\(key)' takes a \(kind) value, not \(value.kind).")
            }
        }
    }

    /// `attributes` with every missing primary-key attribute set to its empty value.
    public func withPrimaryKeyDefaults(_ attributes: Attributes) -> Attributes {
        var out = attributes
        for key in primaryKey where out[key] == nil {
            out[key] = .empty(of: key.kind!)
        }
        return out
    }
}

extension AttributeValue {
    /// Reads `canonicalBytes` back.
    public init(canonical bytes: ArraySlice<UInt8>) throws {
        guard let tag = bytes.first, let kind = AttributeKey.Kind(rawValue: tag) else { throw ByteReader.Malformed() }
        var r = ByteReader(bytes.dropFirst())
        switch kind {
        case .string:
            guard let s = String(validUTF8: bytes.dropFirst()) else { throw ByteReader.Malformed() }
            self = .string(s)
        case .data: self = .data(Data(bytes.dropFirst()))
        case .number: self = .number(Int64(bitPattern: try r.uint64()))
        case .bool: self = .bool(try r.uint8() != 0)
        case .date: self = .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try r.uint64())))
        }
    }
}
