import Foundation

/// The DER encoding of property lists that Apple's Security framework uses for keychain items in
/// a backup (`der_plist.c` and its siblings in Security/OSX/utilities). DER, with Apple's own
/// choices: a dictionary is a SET of SEQUENCEs {key, value} sorted by their encoded bytes, and
/// true is 0x01, not DER's 0xFF.
public enum DERPropertyList {
    enum Tag {
        static let boolean: UInt8 = 0x01
        static let integer: UInt8 = 0x02
        static let octets: UInt8 = 0x04
        static let null: UInt8 = 0x05
        static let utf8String: UInt8 = 0x0C
        static let generalizedTime: UInt8 = 0x18
        static let sequence: UInt8 = 0x30
        static let set: UInt8 = 0x31
    }

    // MARK: Writing

    /// `value` in DER; a real number or a UID has no DER form and is refused.
    public static func encode(_ value: PropertyList) throws -> Data { Data(try element(value)) }

    private static func element(_ value: PropertyList) throws -> [UInt8] {
        switch value {
        case .string(let text): return tagged(Tag.utf8String, Array(text.utf8))
        case .data(let data): return tagged(Tag.octets, Array(data))
        case .integer(let number): return tagged(Tag.integer, twosComplement(number))
        case .boolean(let flag): return tagged(Tag.boolean, [flag ? 0x01 : 0x00])
        case .date(let date): return tagged(Tag.generalizedTime, Array(generalizedTime(date).utf8))
        case .null: return tagged(Tag.null, [])
        case .array(let elements): return tagged(Tag.sequence, try elements.flatMap(element))
        case .dictionary(let entries):
            let encoded = try entries.map { key, value in tagged(Tag.sequence, tagged(Tag.utf8String, Array(key.utf8)) + (try element(value))) }
            return tagged(Tag.set, encoded.sorted { $0.lexicographicallyPrecedes($1) }.flatMap { $0 })
        case .real, .uid:
            throw PropertyListError("a \(value) has no DER property-list form")
        }
    }

    private static func tagged(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    /// DER lengths: one byte below 128, else 0x80 + the count of big-endian bytes that follow.
    private static func length(_ count: Int) -> [UInt8] {
        guard count >= 0x80 else { return [UInt8(count)] }
        let bytes = withUnsafeBytes(of: UInt64(count).bigEndian) { Array($0) }.drop { $0 == 0 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// The shortest two's complement of `number`, big-endian.
    private static func twosComplement(_ number: Int64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: number.bigEndian) { Array($0) }
        while bytes.count > 1, (bytes[0] == 0x00 && bytes[1] < 0x80) || (bytes[0] == 0xFF && bytes[1] >= 0x80) { bytes.removeFirst() }
        return bytes
    }

    /// `YYYYMMDDhhmmss`, a fraction of a second when there is one (at most six digits, no
    /// trailing zero), `Z`: UTC.
    static func generalizedTime(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: seconds))
        var text = String(format: "%04d%02d%02d%02d%02d%02d", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!)
        let micros = Int(((date.timeIntervalSince1970 - seconds) * 1_000_000).rounded())
        if micros > 0, micros < 1_000_000 {
            var fraction = String(format: "%06d", micros)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    // MARK: Reading

    /// The value of DER bytes: one element, nothing after it. Lengths are checked against what
    /// remains, nesting is bounded, and only the tags above are understood.
    public static func decode(_ data: Data) throws -> PropertyList {
        let bytes = Array(data)
        var offset = 0
        let value = try read(bytes, &offset, end: bytes.count, depth: 0)
        guard offset == bytes.count else { throw PropertyListError("\(bytes.count - offset) bytes follow the DER value") }
        return value
    }

    private static func read(_ bytes: [UInt8], _ offset: inout Int, end: Int, depth: Int) throws -> PropertyList {
        guard depth < maximumPropertyListDepth else { throw PropertyListError("nested deeper than \(maximumPropertyListDepth) levels") }
        guard offset < end else { throw PropertyListError("a DER element is missing at byte \(offset)") }
        let tag = bytes[offset]
        offset += 1
        let count = try readLength(bytes, &offset, end: end)
        let content = offset..<offset + count
        offset = content.upperBound
        switch tag {
        case Tag.utf8String:
            guard let text = String(bytes: bytes[content], encoding: .utf8) else { throw PropertyListError("a DER string is not UTF-8") }
            return .string(text)
        case Tag.octets: return .data(Data(bytes[content]))
        case Tag.null:
            guard count == 0 else { throw PropertyListError("a DER NULL has content") }
            return .null
        case Tag.boolean:
            guard count == 1 else { throw PropertyListError("a DER boolean of \(count) bytes") }
            return .boolean(bytes[content.lowerBound] != 0)
        case Tag.integer:
            guard (1...8).contains(count) else { throw PropertyListError("a DER integer of \(count) bytes (at most 8 are read)") }
            let negative = bytes[content.lowerBound] >= 0x80
            let raw = bytes[content].reduce(UInt64(negative ? UInt64.max : 0)) { $0 << 8 | UInt64($1) }
            return .integer(Int64(bitPattern: raw))
        case Tag.generalizedTime:
            guard let date = parseGeneralizedTime(String(decoding: bytes[content], as: UTF8.self)) else {
                throw PropertyListError("a DER time is not YYYYMMDDhhmmss[.fraction]Z")
            }
            return .date(date)
        case Tag.sequence:
            var elements: [PropertyList] = []
            var inner = content.lowerBound
            while inner < content.upperBound { elements.append(try read(bytes, &inner, end: content.upperBound, depth: depth + 1)) }
            return .array(elements)
        case Tag.set:
            var entries: [String: PropertyList] = [:]
            var inner = content.lowerBound
            while inner < content.upperBound {
                guard case .array(let pair) = try read(bytes, &inner, end: content.upperBound, depth: depth + 1), pair.count == 2,
                    case .string(let key) = pair[0]
                else {
                    throw PropertyListError("a DER dictionary entry is not a {string, value} sequence")
                }
                entries[key] = pair[1]
            }
            return .dictionary(entries)
        default:
            throw PropertyListError("the DER tag 0x\(String(tag, radix: 16)) is not a property-list type")
        }
    }

    /// A DER length, which must fit in what remains before `end`.
    private static func readLength(_ bytes: [UInt8], _ offset: inout Int, end: Int) throws -> Int {
        guard offset < end else { throw PropertyListError("a DER length is missing") }
        let first = bytes[offset]
        offset += 1
        var count = Int(first)
        if first >= 0x80 {
            let size = Int(first & 0x7F)
            guard (1...8).contains(size), size <= end - offset else { throw PropertyListError("a DER length of \(size) bytes") }
            let value = bytes[offset..<offset + size].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            offset += size
            guard value <= UInt64(end - offset) else { throw PropertyListError("a DER element of \(value) bytes runs past its container") }
            count = Int(value)
        }
        guard count <= end - offset else { throw PropertyListError("a DER element of \(count) bytes runs past its container") }
        return count
    }

    static func parseGeneralizedTime(_ text: String) -> Date? {
        guard text.hasSuffix("Z"), text.count >= 15 else { return nil }
        let body = text.dropLast()
        let whole = body.prefix(14)
        guard whole.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        let digits = whole.compactMap { $0.wholeNumberValue }
        func number(_ range: Range<Int>) -> Int { range.reduce(0) { $0 * 10 + digits[$1] } }
        var parts = DateComponents()
        (parts.year, parts.month, parts.day) = (number(0..<4), number(4..<6), number(6..<8))
        (parts.hour, parts.minute, parts.second) = (number(8..<10), number(10..<12), number(12..<14))
        guard (1...12).contains(parts.month!), (1...31).contains(parts.day!), parts.hour! < 24, parts.minute! < 60, parts.second! < 61 else { return nil }
        var fraction = 0.0
        let rest = body.dropFirst(14)
        if !rest.isEmpty {
            guard rest.first == ".", rest.count >= 2, rest.count <= 10, rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            fraction = Double("0" + rest) ?? 0
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: parts).map { $0.addingTimeInterval(fraction) }
    }
}
