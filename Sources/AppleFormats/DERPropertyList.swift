package import Foundation

/// The DER encoding of property lists that Apple's Security framework uses for keychain items in
/// a backup (`der_plist.c` and its siblings in Security/OSX/utilities). DER, with Apple's own
/// choices: a dictionary is a SET of SEQUENCEs {key, value} sorted by their encoded bytes, and
/// true is 0x01, not DER's 0xFF.
package enum DERPropertyList {
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
    package static func encode(_ value: PropertyList) throws -> Data {
        var bytes: [UInt8] = []
        try append(value, to: &bytes)
        return Data(bytes)
    }

    private static func append(_ value: PropertyList, to bytes: inout [UInt8]) throws {
        switch value {
        case .string(let text): append(Tag.utf8String, text.utf8, to: &bytes)
        case .data(let data): append(Tag.octets, data, to: &bytes)
        case .integer(let number): append(Tag.integer, twosComplement(number), to: &bytes)
        case .boolean(let flag): append(Tag.boolean, [flag ? 0x01 : 0x00], to: &bytes)
        case .date(let date): append(Tag.generalizedTime, generalizedTimeBytes(date), to: &bytes)
        case .null: append(Tag.null, [], to: &bytes)
        case .array(let elements):
            var content: [UInt8] = []
            for element in elements { try append(element, to: &content) }
            append(Tag.sequence, content, to: &bytes)
        case .dictionary(let entries):
            let encoded = try entries.map { key, value in
                var pair: [UInt8] = []
                append(Tag.utf8String, key.utf8, to: &pair)
                try append(value, to: &pair)
                var entry: [UInt8] = []
                append(Tag.sequence, pair, to: &entry)
                return entry
            }
            var content: [UInt8] = []
            for entry in encoded.sorted(by: { $0.lexicographicallyPrecedes($1) }) { content += entry }
            append(Tag.set, content, to: &bytes)
        case .real, .uid:
            throw PropertyListError("a \(value) has no DER property-list form")
        }
    }

    /// A tag, the length of `content`, then `content`.
    private static func append(_ tag: UInt8, _ content: some Collection<UInt8>, to bytes: inout [UInt8]) {
        bytes.append(tag)
        bytes += length(content.count)
        bytes += content
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
    static func generalizedTime(_ date: Date) -> String { String(decoding: generalizedTimeBytes(date), as: UTF8.self) }

    private static func generalizedTimeBytes(_ date: Date) -> [UInt8] {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let whole = Int64(exactly: seconds) ?? 0
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let time = whole - days * 86_400
        let (year, month, day) = CivilDate.fromDays(days)
        var text: [UInt8] = (0...9999).contains(year) ? digits(year, 4) : Array(String(year).utf8)
        for part in [month, day, time / 3600, time / 60 % 60, time % 60] { text += digits(part, 2) }
        let micros = Int64(((date.timeIntervalSince1970 - seconds) * 1_000_000).rounded())
        if micros > 0, micros < 1_000_000 {
            var fraction = digits(micros, 6)
            while fraction.last == UInt8(ascii: "0") { fraction.removeLast() }
            text += [UInt8(ascii: ".")] + fraction
        }
        return text + [UInt8(ascii: "Z")]
    }

    /// `number` (not negative) in `count` decimal digits, zeros in front.
    private static func digits(_ number: Int64, _ count: Int) -> [UInt8] {
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: count)
        var rest = number
        for index in stride(from: count - 1, through: 0, by: -1) {
            digits[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        return digits
    }

    // MARK: Reading

    /// The value of DER bytes: one element, nothing after it. Lengths are checked against what
    /// remains, nesting is bounded, and only the tags above are understood.
    package static func decode(_ data: Data) throws -> PropertyList {
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
            guard let text = String(validating: bytes[content], as: UTF8.self) else { throw PropertyListError("a DER string is not UTF-8") }
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
            guard let date = parseGeneralizedTime(bytes[content]) else {
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

    static func parseGeneralizedTime(_ text: String) -> Date? { parseGeneralizedTime(ArraySlice(text.utf8)) }

    static func parseGeneralizedTime(_ text: ArraySlice<UInt8>) -> Date? {
        let text = Array(text)
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        guard text.count >= 15, text.last == UInt8(ascii: "Z"), text[0..<14].allSatisfy(isDigit) else { return nil }
        func number(_ range: Range<Int>) -> Int { range.reduce(0) { $0 * 10 + Int(text[$1] - UInt8(ascii: "0")) } }
        let (year, month, day) = (number(0..<4), number(4..<6), number(6..<8))
        let (hour, minute, second) = (number(8..<10), number(10..<12), number(12..<14))
        guard (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var fraction = 0.0
        let rest = text[14..<text.count - 1]
        if !rest.isEmpty {
            guard rest.first == UInt8(ascii: "."), (2...10).contains(rest.count), rest.dropFirst().allSatisfy(isDigit) else { return nil }
            fraction = rest.dropFirst().reversed().reduce(0.0) { ($0 + Double($1 - UInt8(ascii: "0"))) / 10 }
        }
        // A day past the month's end rolls over into the next, as Calendar does.
        let days = CivilDate.days(year: Int64(year), month: Int64(month), day: 1) + Int64(day - 1)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}

/// Days since 1970-01-01 and proleptic Gregorian dates, both ways, by arithmetic alone (the
/// era-of-400-years method of Howard Hinnant's "chrono-Compatible Low-Level Date Algorithms"):
/// a keychain of 100,000 items has 200,000 dates, and Calendar is slow for that.
enum CivilDate {
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func fromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
