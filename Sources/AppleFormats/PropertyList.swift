package import Foundation

/// A property-list value as Apple's formats carry it: the binary plists of an iOS backup (with
/// the UIDs of keyed archives) and the DER plists of its keychain. A pure value: encoders and
/// decoders live beside it (`BinaryPropertyList`, `DERPropertyList`).
package indirect enum PropertyList: Equatable, Sendable {
    case string(String)
    case data(Data)
    case integer(Int64)
    case real(Double)
    case boolean(Bool)
    case date(Date)
    case array([PropertyList])
    case dictionary([String: PropertyList])
    /// A keyed archive's reference to another of its objects (binary plists only).
    case uid(UInt64)
    /// DER's NULL (DER plists only).
    case null

    /// The value under `key` of a dictionary; nil for a missing key or anything else.
    package subscript(key: String) -> PropertyList? {
        guard case .dictionary(let entries) = self else { return nil }
        return entries[key]
    }

    package var string: String? { if case .string(let value) = self { value } else { nil } }
    package var data: Data? { if case .data(let value) = self { value } else { nil } }
    package var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    package var boolean: Bool? { if case .boolean(let value) = self { value } else { nil } }
    package var date: Date? { if case .date(let value) = self { value } else { nil } }
    package var array: [PropertyList]? { if case .array(let value) = self { value } else { nil } }
    package var dictionary: [String: PropertyList]? { if case .dictionary(let value) = self { value } else { nil } }
    package var uid: UInt64? { if case .uid(let value) = self { value } else { nil } }
}

/// Why bytes are not the property list they claim to be; `description` says where.
package struct PropertyListError: Error, Equatable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// How deep any property list Keyferry reads may nest: far past what a backup holds, and well
/// inside the stack a reader recurses on.
package let maximumPropertyListDepth = 64
