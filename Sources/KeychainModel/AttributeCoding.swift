import Foundation

// How attributes travel as JSON (the node's control API): an object keyed by attribute name,
// each value tagged with its kind so data and dates survive the trip exactly.

extension AttributeKey: Codable, CodingKeyRepresentable {
    public var codingKey: any CodingKey { AnyCodingKey(name) }

    public init?<T: CodingKey>(codingKey: T) {
        self.init(name: codingKey.stringValue)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let key = AttributeKey(name: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not a keychain attribute"))
        }
        self = key
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

private struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// `{"string": "alice"}`, `{"data": "<base64>"}`, `{"number": 443}`, `{"bool": true}`,
/// `{"date": <seconds since 2001>}`.
extension AttributeValue: Codable {
    private enum Tag: String, CodingKey { case string, data, number, bool, date }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Tag.self)
        guard container.allKeys.count == 1, let tag = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "an attribute value has exactly one of string, data, number, bool, date"))
        }
        switch tag {
        case .string: self = .string(try container.decode(String.self, forKey: tag))
        case .data: self = .data(try container.decode(Data.self, forKey: tag))
        case .number: self = .number(try container.decode(Int64.self, forKey: tag))
        case .bool: self = .bool(try container.decode(Bool.self, forKey: tag))
        case .date: self = .date(Date(timeIntervalSinceReferenceDate: try container.decode(Double.self, forKey: tag)))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Tag.self)
        switch self {
        case .string(let s): try container.encode(s, forKey: .string)
        case .data(let d): try container.encode(d, forKey: .data)
        case .number(let n): try container.encode(n, forKey: .number)
        case .bool(let b): try container.encode(b, forKey: .bool)
        case .date(let d): try container.encode(d.timeIntervalSinceReferenceDate, forKey: .date)
        }
    }
}
