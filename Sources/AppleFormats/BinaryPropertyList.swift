package import Foundation

/// Apple's binary property lists (`bplist00`), as CoreFoundation lays them out
/// (swift-corelibs-foundation, `CFBinaryPList.c`): a header, the objects, an offset table, and a
/// 32-byte trailer. Foundation on Linux reads and writes them too, but hides a keyed archive's
/// UIDs and cannot name an archived class `MBFile`; this codec does both.
package enum BinaryPropertyList {
    static let magic = Array("bplist00".utf8)

    // MARK: Writing

    /// `value` as a binary plist. Dictionaries are written with their keys sorted, so the same
    /// value always gives the same bytes, and each key string once, as CoreFoundation does.
    package static func encode(_ value: PropertyList) -> Data {
        // Every object is numbered before it is written: a collection's references need the
        // numbers of its members.
        var objects: [PropertyList] = []
        var keyNumbers: [String: Int] = [:]
        func number(_ value: PropertyList) -> Int {
            objects.append(value)
            return objects.count - 1
        }
        func numberKey(_ key: String) -> Int {
            if let known = keyNumbers[key] { return known }
            let new = number(.string(key))
            keyNumbers[key] = new
            return new
        }
        _ = number(value)
        var references: [[Int]] = []
        while references.count < objects.count {
            switch objects[references.count] {
            case .array(let elements): references.append(elements.map(number))
            case .dictionary(let entries):
                let keys = entries.keys.sorted()
                references.append(keys.map(numberKey) + keys.map { number(entries[$0]!) })
            default: references.append([])
            }
        }
        let referenceSize = byteCount(for: UInt64(objects.count))
        var bytes = magic
        var offsets: [UInt64] = []
        offsets.reserveCapacity(objects.count)
        for (index, object) in objects.enumerated() {
            offsets.append(UInt64(bytes.count))
            append(object, references: references[index], referenceSize: referenceSize, to: &bytes)
        }
        let tableOffset = UInt64(bytes.count)
        let offsetSize = byteCount(for: tableOffset)
        for offset in offsets { bytes += BigEndian.bytes(offset, count: offsetSize) }
        bytes += [UInt8](repeating: 0, count: 6) + [UInt8(offsetSize), UInt8(referenceSize)]
        bytes += BigEndian.bytes(UInt64(objects.count), count: 8) + BigEndian.bytes(0, count: 8) + BigEndian.bytes(tableOffset, count: 8)
        return Data(bytes)
    }

    private static func append(_ value: PropertyList, references: [Int], referenceSize: Int, to bytes: inout [UInt8]) {
        switch value {
        case .boolean(let flag): bytes.append(flag ? 0x09 : 0x08)
        case .integer(let number): bytes += integer(number)
        case .real(let number): bytes += [0x23] + BigEndian.bytes(number.bitPattern, count: 8)
        case .date(let date): bytes += [0x33] + BigEndian.bytes(date.timeIntervalSinceReferenceDate.bitPattern, count: 8)
        case .data(let data):
            bytes += marker(0x40, count: data.count)
            bytes += data
        case .string(let text):
            if text.utf8.allSatisfy({ $0 < 0x80 }) {
                bytes += marker(0x50, count: text.utf8.count)
                bytes += text.utf8
            } else {
                let units = Array(text.utf16)
                bytes += marker(0x60, count: units.count)
                for unit in units { bytes += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
            }
        case .uid(let number):
            let size = byteCount(for: number)
            bytes += [0x80 | UInt8(size - 1)] + BigEndian.bytes(number, count: size)
        case .array:
            bytes += marker(0xA0, count: references.count)
            for reference in references { bytes += BigEndian.bytes(UInt64(reference), count: referenceSize) }
        case .dictionary:
            bytes += marker(0xD0, count: references.count / 2)
            for reference in references { bytes += BigEndian.bytes(UInt64(reference), count: referenceSize) }
        case .null: bytes.append(0x00)
        }
    }

    /// A non-negative integer in the fewest of 1, 2 or 4 bytes, else (and any negative one) 8.
    private static func integer(_ number: Int64) -> [UInt8] {
        guard number >= 0 else { return [0x13] + BigEndian.bytes(UInt64(bitPattern: number), count: 8) }
        let size = byteCount(for: UInt64(number))
        return [0x10 | UInt8(size.trailingZeroBitCount)] + BigEndian.bytes(UInt64(number), count: size)
    }

    /// A collection's marker: the count in its low nibble, or `F` and an integer object.
    private static func marker(_ kind: UInt8, count: Int) -> [UInt8] {
        count < 15 ? [kind | UInt8(count)] : [kind | 0x0F] + integer(Int64(count))
    }

    /// 1, 2, 4 or 8: the fewest bytes that hold `number`.
    private static func byteCount(for number: UInt64) -> Int {
        number <= 0xFF ? 1 : number <= 0xFFFF ? 2 : number <= 0xFFFF_FFFF ? 4 : 8
    }

    // MARK: Reading

    /// The value of a binary plist. Every offset, count and reference is checked against the
    /// bytes there are, nesting is bounded and cycles are refused, so no input makes the
    /// reader trap, loop or allocate more than a small multiple of its size.
    package static func decode(_ data: Data) throws -> PropertyList {
        var reader = try Reader(Array(data))
        return try reader.value(reader.top, depth: 0)
    }

    private struct Reader {
        let bytes: [UInt8]
        let offsets: [Int]
        let referenceSize: Int
        let top: Int
        /// Objects being read, from the top down to the current one: a reference back to one of
        /// them is a cycle.
        var open: Set<Int> = []
        /// Each object decoded once, with what it expands to: a shared object is one value (its
        /// storage shared by every copy), however often it is referenced.
        var decoded: [Int: (value: PropertyList, values: Int, bytes: Int, height: Int)] = [:]
        /// The deepest level reached so far: what a shared object's height is measured by.
        var deepest = 0
        /// Values, and bytes of data and strings, still to be made, counted as if every shared
        /// object were copied: a few objects shared many times over, level after level, would
        /// otherwise make a small file into billions of values, or a terabyte for a reader that
        /// copies them out.
        var budget: Int
        var byteBudget: Int

        init(_ bytes: [UInt8]) throws {
            guard bytes.count >= 8 + 32, Array(bytes.prefix(6)) == Array(BinaryPropertyList.magic.prefix(6)) else {
                throw PropertyListError("not a binary property list (no bplist header, or shorter than its trailer)")
            }
            let trailer = bytes.count - 32
            let offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let count = Self.number(bytes, at: trailer + 8, size: 8)
            let top = Self.number(bytes, at: trailer + 16, size: 8)
            let table = Self.number(bytes, at: trailer + 24, size: 8)
            guard [1, 2, 4, 8].contains(offsetSize), [1, 2, 4, 8].contains(referenceSize) else {
                throw PropertyListError("its trailer gives offsets of \(offsetSize) bytes and references of \(referenceSize)")
            }
            guard count > 0, top < count, table >= 8, table <= UInt64(trailer),
                count <= (UInt64(trailer) - table) / UInt64(offsetSize)
            else {
                throw PropertyListError("its trailer does not fit the file (\(count) objects, top \(top), offset table at \(table))")
            }
            self.bytes = bytes
            self.top = Int(top)
            budget = max(1 << 16, 8 * Int(count))
            byteBudget = max(1 << 20, 8 * bytes.count)
            offsets = try (0..<Int(count)).map { index in
                let offset = Self.number(bytes, at: Int(table) + index * offsetSize, size: offsetSize)
                guard offset >= 8, offset < table else { throw PropertyListError("object \(index) is said to be at \(offset), outside the objects") }
                return Int(offset)
            }
        }

        static func number(_ bytes: [UInt8], at offset: Int, size: Int) -> UInt64 {
            BigEndian.number(bytes[offset..<offset + size])
        }

        mutating func value(_ index: Int, depth: Int) throws -> PropertyList {
            guard depth < maximumPropertyListDepth else { throw PropertyListError("nested deeper than \(maximumPropertyListDepth) levels") }
            guard index >= 0, index < offsets.count else { throw PropertyListError("a reference to object \(index) of \(offsets.count)") }
            guard !open.contains(index) else { throw PropertyListError("object \(index) contains itself") }
            if let known = decoded[index] {
                // Shared deeper down than where it was first read, it still may not nest too deep.
                guard depth + known.height < maximumPropertyListDepth else {
                    throw PropertyListError("nested deeper than \(maximumPropertyListDepth) levels")
                }
                deepest = max(deepest, depth + known.height)
                budget -= known.values
                byteBudget -= known.bytes
                try checkBudgets()
                return known.value
            }
            let (valuesBefore, bytesBefore, deepestBefore) = (budget, byteBudget, deepest)
            deepest = depth
            defer { deepest = max(deepest, deepestBefore) }
            budget -= 1
            try checkBudgets()
            open.insert(index)
            defer { open.remove(index) }
            let value = try decode(index, depth: depth)
            switch value {
            case .data(let data): byteBudget -= data.count
            case .string(let text): byteBudget -= text.utf8.count
            default: break
            }
            try checkBudgets()
            decoded[index] = (value, valuesBefore - budget, bytesBefore - byteBudget, deepest - depth)
            return value
        }

        func checkBudgets() throws {
            guard budget >= 0 else { throw PropertyListError("its shared objects expand to more values than a property list of its size holds") }
            guard byteBudget >= 0 else { throw PropertyListError("its shared objects expand to more bytes than a property list of its size holds") }
        }

        mutating func decode(_ index: Int, depth: Int) throws -> PropertyList {
            var at = offsets[index]
            let marker = bytes[at]
            at += 1
            let low = Int(marker & 0x0F)
            switch marker >> 4 {
            case 0x0:
                switch marker {
                case 0x00: return .null
                case 0x08: return .boolean(false)
                case 0x09: return .boolean(true)
                default: throw PropertyListError("object \(index) has the unknown marker \(String(marker, radix: 16))")
                }
            case 0x1:
                return .integer(try integer(at: &at, sizeLog2: low, index))
            case 0x2, 0x3:
                guard low == 2 || low == 3, let raw = take(1 << low, at: &at) else {
                    throw PropertyListError("object \(index) is a number of \(1 << low) bytes, or runs past the objects")
                }
                let number = low == 3 ? Double(bitPattern: raw) : Double(Float(bitPattern: UInt32(raw)))
                return marker >> 4 == 0x3 ? .date(Date(timeIntervalSinceReferenceDate: number)) : .real(number)
            case 0x4:
                let count = try self.count(low, at: &at, index)
                guard let range = span(count, at: at) else { throw PropertyListError("object \(index), data of \(count) bytes, runs past the objects") }
                return .data(Data(bytes[range]))
            case 0x5:
                let count = try self.count(low, at: &at, index)
                guard let range = span(count, at: at), let text = String(bytes: bytes[range], encoding: .ascii) else {
                    throw PropertyListError("object \(index) is not an ASCII string of \(count) bytes")
                }
                return .string(text)
            case 0x6:
                let count = try self.count(low, at: &at, index)
                guard count <= Int.max / 2, let range = span(count * 2, at: at) else {
                    throw PropertyListError("object \(index), a string of \(count) UTF-16 units, runs past the objects")
                }
                let units = stride(from: range.lowerBound, to: range.upperBound, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
                return .string(String(decoding: units, as: UTF16.self))
            case 0x8:
                guard low < 8, let number = take(low + 1, at: &at) else { throw PropertyListError("object \(index), a UID, runs past the objects") }
                return .uid(number)
            case 0xA:
                let count = try self.count(low, at: &at, index)
                return .array(try references(count, at: at, index).map { try value($0, depth: depth + 1) })
            case 0xD:
                let count = try self.count(low, at: &at, index)
                guard count <= Int.max / 2 else { throw PropertyListError("object \(index) claims \(count) entries") }
                let all = try references(count * 2, at: at, index)
                var entries: [String: PropertyList] = [:]
                for (key, item) in zip(all.prefix(count), all.suffix(count)) {
                    guard case .string(let name) = try value(key, depth: depth + 1) else {
                        throw PropertyListError("object \(index) is a dictionary with a key that is not a string")
                    }
                    entries[name] = try value(item, depth: depth + 1)
                }
                return .dictionary(entries)
            default:
                throw PropertyListError("object \(index) has the unknown marker \(String(marker, radix: 16))")
            }
        }

        /// An integer object's value: 1, 2 or 4 bytes unsigned, 8 signed (16-byte ones, which
        /// CoreFoundation writes for large unsigned values, are refused).
        func integer(at offset: inout Int, sizeLog2: Int, _ index: Int) throws -> Int64 {
            guard sizeLog2 <= 3, let raw = take(1 << sizeLog2, at: &offset) else {
                throw PropertyListError("object \(index) is an integer of \(1 << min(sizeLog2, 7)) bytes, or runs past the objects")
            }
            return Int64(bitPattern: raw)
        }

        /// A collection's count: the marker's nibble, or the integer object after it.
        func count(_ nibble: Int, at offset: inout Int, _ index: Int) throws -> Int {
            guard nibble == 0x0F else { return nibble }
            guard offset < bytes.count, bytes[offset] >> 4 == 0x1 else { throw PropertyListError("object \(index) has no count") }
            let sizeLog2 = Int(bytes[offset] & 0x0F)
            offset += 1
            let count = try integer(at: &offset, sizeLog2: sizeLog2, index)
            guard count >= 0, count <= bytes.count else { throw PropertyListError("object \(index) claims \(count) members, more than the file holds") }
            return Int(count)
        }

        func references(_ count: Int, at offset: Int, _ index: Int) throws -> [Int] {
            guard count <= Int.max / referenceSize, let range = span(count * referenceSize, at: offset) else {
                throw PropertyListError("object \(index), a collection of \(count), runs past the objects")
            }
            return stride(from: range.lowerBound, to: range.upperBound, by: referenceSize).map {
                Int(clamping: Self.number(bytes, at: $0, size: referenceSize))
            }
        }

        /// `count` bytes from `offset`, when they are all there.
        func span(_ count: Int, at offset: Int) -> Range<Int>? {
            guard count >= 0, offset <= bytes.count, count <= bytes.count - offset else { return nil }
            return offset..<offset + count
        }

        func take(_ size: Int, at offset: inout Int) -> UInt64? {
            guard size <= 8, let range = span(size, at: offset) else { return nil }
            offset = range.upperBound
            return Self.number(bytes, at: range.lowerBound, size: size)
        }
    }
}
