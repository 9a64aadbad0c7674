public import Foundation

/// Builds the length-prefixed binary encodings of Keyferry's formats (see `Protocol/`).
/// Integers are little-endian; variable-length fields carry a 32-bit length.
///
/// The primitives are inlinable: every row and archived item goes through them, and a
/// specialized copy at each call site appends whole buffers instead of element by element.
public struct ByteWriter: Sendable {
    @usableFromInline var storage: [UInt8] = []
    public var bytes: [UInt8] { storage }
    public init() {}
    /// A writer with room for `capacity` bytes: one allocation for a record of known size.
    public init(capacity: Int) { storage.reserveCapacity(capacity) }

    @inlinable public mutating func uint8(_ v: UInt8) { storage.append(v) }
    @inlinable public mutating func uint32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { storage.append(contentsOf: $0) } }
    @inlinable public mutating func uint64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { storage.append(contentsOf: $0) } }
    @inlinable public mutating func raw(_ b: some Sequence<UInt8>) { storage.append(contentsOf: b) }
    /// A 32-bit length, then the bytes.
    @inlinable public mutating func lengthPrefixed(_ b: some Collection<UInt8>) {
        uint32(UInt32(b.count))
        if b.withContiguousStorageIfAvailable({ storage.append(contentsOf: $0) }) == nil { storage.append(contentsOf: b) }
    }
    @inlinable public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { lengthPrefixed($0) }
    }
}

/// Reads what `ByteWriter` wrote; every read checks bounds and throws on a short input.
public struct ByteReader {
    /// The input ended early or held a value that does not decode.
    public struct Malformed: Error { public init() {} }
    private let input: ArraySlice<UInt8>
    public private(set) var offset: Int

    public init(_ bytes: [UInt8]) { self.init(bytes[...]) }

    public init(_ bytes: ArraySlice<UInt8>) {
        input = bytes
        offset = bytes.startIndex
    }

    public var isAtEnd: Bool { offset == input.endIndex }

    public mutating func uint8() throws -> UInt8 { try raw(1).first! }
    public mutating func uint32() throws -> UInt32 {
        UInt32(littleEndian: try raw(4).withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
    }
    public mutating func uint64() throws -> UInt64 {
        UInt64(littleEndian: try raw(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
    }
    public mutating func raw(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, input.endIndex - offset >= count else { throw Malformed() }
        defer { offset += count }
        return input[offset..<offset + count]
    }
    public mutating func lengthPrefixed() throws -> ArraySlice<UInt8> { try raw(Int(uint32())) }
    public mutating func string() throws -> String {
        guard let s = String(validUTF8: try lengthPrefixed()) else { throw Malformed() }
        return s
    }
}

extension String {
    /// The bytes as a string when they are valid UTF-8. Decoding repairs invalid input with
    /// U+FFFD, which changes its bytes, so equal bytes mean valid input: the standard library's
    /// UTF-8 decoding is specialized at the call, where `String(validating:as:)` looks up its
    /// encoding's generic metadata on every call (a row read decodes a dozen strings).
    init?(validUTF8 bytes: ArraySlice<UInt8>) {
        let matched: String? = bytes.withUnsafeBufferPointer { buffer in
            var decoded = String(decoding: buffer, as: UTF8.self)
            return decoded.withUTF8 { $0.elementsEqual(buffer) } ? decoded : nil
        }
        guard let matched else { return nil }
        self = matched
    }
}

// The encodings of model values that both the store's rows and backup archives carry.

extension ByteWriter {
    /// An optional access control: `0`, or `1 | protection | flags u64`.
    public mutating func accessControl(_ accessControl: AccessControl?) {
        guard let accessControl else { return uint8(0) }
        uint8(1)
        string(accessControl.protection.rawValue)
        uint64(UInt64(accessControl.flags.rawValue))
    }

    /// Seconds since 2001 as the IEEE 754 bit pattern.
    public mutating func date(_ date: Date) { uint64(date.timeIntervalSinceReferenceDate.bitPattern) }

    public mutating func uuid(_ uuid: UUID) { withUnsafeBytes(of: uuid.uuid) { raw($0) } }

    /// The UUID as `UUID.uuidString` spells it (uppercase hex, dashed 8-4-4-4-12), without a
    /// length: Foundation formats through `sprintf`, once per archived item.
    public mutating func uuidText(_ uuid: UUID) {
        func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10 }
        var text: [UInt8] = []
        text.reserveCapacity(36)
        withUnsafeBytes(of: uuid.uuid) { bytes in
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
                text.append(digit(byte >> 4))
                text.append(digit(byte & 0x0F))
            }
        }
        raw(text)
    }

    /// A count, then each attribute sorted by key as (key, canonical value).
    public mutating func attributes(_ attributes: Attributes) {
        uint32(UInt32(attributes.count))
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            string(key.rawValue)
            canonical(value)
        }
    }

    /// `primaryKey.canonicalBytes`, written in place: every lookup hashes one.
    public mutating func primaryKey(_ primaryKey: PrimaryKey) {
        string(primaryKey.itemClass.rawValue)
        string(primaryKey.accessGroup)
        uint8(primaryKey.synchronizable ? 1 : 0)
        for value in primaryKey.values { canonical(value) }
    }

    /// An attribute block exactly as it was read.
    public mutating func attributes(_ encoded: EncodedAttributes) { raw(encoded.bytes) }

    /// `value.canonicalBytes`, length-prefixed, written in place: every attribute of every
    /// row and archived item passes here.
    public mutating func canonical(_ value: AttributeValue) {
        switch value {
        case .string(var s):
            s.withUTF8 { utf8 in
                uint32(UInt32(1 + utf8.count))
                uint8(AttributeKey.Kind.string.rawValue)
                raw(utf8)
            }
        case .data(let d):
            uint32(UInt32(1 + d.count))
            uint8(AttributeKey.Kind.data.rawValue)
            raw(d)
        default:
            lengthPrefixed(value.canonicalBytes)
        }
    }
}

extension ByteReader {
    /// Reads what `ByteWriter.accessControl` wrote, validating it.
    public mutating func accessControl() throws -> AccessControl? {
        guard try uint8() == 1 else { return nil }
        guard let protection = ProtectionClass(rawValue: try string()) else { throw Malformed() }
        return try AccessControl(protection: protection, flags: AccessControlFlags(rawValue: UInt(truncatingIfNeeded: try uint64())))
    }

    public mutating func date() throws -> Date { Date(timeIntervalSinceReferenceDate: Double(bitPattern: try uint64())) }

    public mutating func uuid() throws -> UUID { UUID(uuid: try raw(16).withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }) }

    /// The next attribute block, checked for framing but left in its coding.
    public mutating func encodedAttributes() throws -> EncodedAttributes {
        let start = offset
        for _ in 0..<(try uint32()) {
            _ = try lengthPrefixed()
            _ = try lengthPrefixed()
        }
        return EncodedAttributes(bytes: Array(input[start..<offset]))
    }

    public mutating func attributes() throws -> Attributes {
        let count = try uint32()
        var attributes = Attributes(minimumCapacity: Int(min(count, 64)))
        for _ in 0..<count {
            let key = AttributeKey(rawValue: try string())
            attributes[key] = try AttributeValue(canonical: try lengthPrefixed())
        }
        return attributes
    }
}

/// Attributes in their byte coding (`ByteWriter.attributes`), carried from a row to an archive
/// without being decoded: the dictionary would cost more than the rest of a backup's work.
public struct EncodedAttributes: Sendable, Equatable {
    public let bytes: [UInt8]

    public func decoded() throws -> Attributes {
        var reader = ByteReader(bytes)
        return try reader.attributes()
    }

    /// The selected attributes that are present, found in one scan that decodes nothing else.
    public func values(of selection: AttributeSelection) throws -> SelectedAttributes {
        var reader = ByteReader(bytes)
        var found = SelectedAttributes(selection: selection)
        for _ in 0..<(try reader.uint32()) {
            let name = try reader.lengthPrefixed()
            let value = try reader.lengthPrefixed()
            if let index = selection.names.firstIndex(where: { $0.count == name.count && $0.elementsEqual(name) }) {
                found.values[index] = try AttributeValue(canonical: value)
            }
        }
        return found
    }
}

/// A few attributes to pick out of `EncodedAttributes`, their names coded once.
public struct AttributeSelection: Sendable {
    public let keys: [AttributeKey]
    fileprivate let names: [[UInt8]]

    public init(_ keys: [AttributeKey]) {
        self.keys = keys
        names = keys.map { Array($0.rawValue.utf8) }
    }
}

/// The values `EncodedAttributes.values(of:)` found.
public struct SelectedAttributes: Sendable {
    public let selection: AttributeSelection
    fileprivate var values: [AttributeValue?]

    fileprivate init(selection: AttributeSelection) {
        self.selection = selection
        values = Array(repeating: nil, count: selection.keys.count)
    }

    /// The value of `key`; nil when absent or not selected.
    public subscript(key: AttributeKey) -> AttributeValue? {
        selection.keys.firstIndex(of: key).flatMap { values[$0] }
    }
}

extension UUID {
    /// The sixteen bytes, as the store, archives and relays keep a UUID.
    public var bytes: Data { withUnsafeBytes(of: uuid) { Data($0) } }

    /// Whether this UUID sorts before `other` as their `uuidString`s do: uppercase hex with
    /// dashes in fixed places orders as the bytes do, so neither is formatted (Foundation
    /// formats through `snprintf`, twice per comparison of a sort).
    public func precedesInTextOrder(_ other: UUID) -> Bool {
        withUnsafeBytes(of: uuid) { mine in withUnsafeBytes(of: other.uuid) { mine.lexicographicallyPrecedes($0) } }
    }

    /// A UUID read back as it was stored, whatever its version: an imported item may carry a
    /// name-based (version 5) or time-based (version 1) one, and its sealed header names it so.
    /// Nil unless there are sixteen bytes.
    public init?<Bytes: Collection<UInt8>>(storedBytes bytes: Bytes) {
        guard bytes.count == 16 else { return nil }
        self = Array(bytes).withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }
}
