import Foundation
import Testing

@testable import AppleFormats

@Suite("DER property lists")
struct DERPropertyListTests {
    static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    @Test("dates by arithmetic agree with the Gregorian calendar from 1600 to 2400, both ways, leap days and fractions included")
    func dates() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var generator = SystemRandomNumberGenerator()
        let start = -11_676_096_000.0  // 1600-01-01
        let samples =
            (0..<2_000).map { _ in Date(timeIntervalSince1970: start + Double(generator.next() % 25_246_080_000)) }
            + [Date(timeIntervalSince1970: 951_782_400), Date(timeIntervalSince1970: 4_107_456_000), Date(timeIntervalSince1970: 0.25)]
        for date in samples {
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let text = DERPropertyList.generalizedTime(date)
            #expect(
                text.prefix(14) == String(format: "%04d%02d%02d%02d%02d%02d", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!),
                "\(date)")
            let parsed = try #require(DERPropertyList.parseGeneralizedTime(text))
            #expect(abs(parsed.timeIntervalSince(date)) < 0.000_001, "\(text)")
        }
        #expect(DERPropertyList.generalizedTime(Date(timeIntervalSince1970: 951_782_400)) == "20000229000000Z")
        #expect(
            DERPropertyList.parseGeneralizedTime("20260231000000Z") == DERPropertyList.parseGeneralizedTime("20260303000000Z"),
            "past the month's end rolls over")
    }

    @Test("the vector of IOS-BACKUP.md: entries sorted by their encoding, true as 0x01, a date without fraction")
    func vector() throws {
        var parts = DateComponents(year: 2026, month: 11, day: 1, hour: 9, minute: 30)
        parts.timeZone = TimeZone(identifier: "UTC")
        let created = try #require(Calendar(identifier: .gregorian).date(from: parts))
        let item: PropertyList = .dictionary([
            "acct": .string("alice"), "sync": .boolean(true), "port": .integer(993), "v_Data": .data(Data("s3cret".utf8)), "cdat": .date(created),
        ])
        let encoded = try DERPropertyList.encode(item)
        #expect(
            Self.hex(encoded)
                == "315130090c0473796e63010101300a0c04706f7274020203e1300d0c04616363740c05616c69636530100c06765f44617461040673336372657430170c0463646174180f32303236313130313039333030305a"
        )
        #expect(try DERPropertyList.decode(encoded) == item)
    }

    @Test("every type round-trips: negative and 8-byte integers, long data, a fraction of a second, arrays, null")
    func roundTrip() throws {
        let value: PropertyList = .dictionary([
            "small": .integer(-1), "edge": .integer(128), "min": .integer(.min), "max": .integer(.max),
            "long": .data(Data(repeating: 7, count: 70_000)), "text": .string("naïve ☃"), "false": .boolean(false),
            "when": .date(Date(timeIntervalSince1970: 1_800_000_000.25)), "list": .array([.integer(1), .null, .array([])]),
            "nested": .dictionary(["inner": .string("x")]),
        ])
        #expect(try DERPropertyList.decode(try DERPropertyList.encode(value)) == value)
        #expect(Self.hex(try DERPropertyList.encode(.integer(128))) == "02020080")
        #expect(Self.hex(try DERPropertyList.encode(.integer(-129))) == "0202ff7f")
        #expect(throws: PropertyListError.self) { try DERPropertyList.encode(.real(1.5)) }
    }

    @Test(
        "hostile DER is a clear error: lengths past the end, an absurd length, deep nesting, unknown tags, trailing bytes",
        arguments: [
            "0c05616c69", "0c8fffffffffffffffffffffff", "0c89ffffffffffffffffff00", "1300", "0c0161ff", "020900000000000000000000",
            "3103300105", "31053003020101", "180431323334",
        ])
    func hostile(hex: String) {
        let bytes = Data(stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! })
        #expect(throws: PropertyListError.self) { try DERPropertyList.decode(bytes) }
    }

    @Test("nesting past the bound is refused, not recursed into")
    func deepNesting() {
        var bytes: [UInt8] = [0x05, 0x00]
        for _ in 0..<200 { bytes = [0x30] + (bytes.count < 128 ? [UInt8(bytes.count)] : [0x82, UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)]) + bytes }
        #expect(throws: PropertyListError.self) { try DERPropertyList.decode(Data(bytes)) }
    }
}

@Suite("Binary property lists")
struct BinaryPropertyListTests {
    static let sample: PropertyList = .dictionary([
        "text": .string("Documents/notes.txt"), "unicode": .string("Ünïcødé ☃"), "count": .integer(1_000_000), "negative": .integer(-5),
        "data": .data(Data((0..<40).map(UInt8.init))), "flag": .boolean(true), "when": .date(Date(timeIntervalSinceReferenceDate: 800_000_000.5)),
        "real": .real(2.5), "many": .array((0..<300).map { .integer(Int64($0)) }), "nested": .dictionary(["empty": .array([])]),
    ])

    @Test("Foundation's reader (CoreFoundation's CFBinaryPList) reads what this writes")
    func readByFoundation() throws {
        let bytes = BinaryPropertyList.encode(Self.sample)
        #expect(bytes.prefix(8) == Data("bplist00".utf8))
        var format = PropertyListSerialization.PropertyListFormat.xml
        let read = try #require(try PropertyListSerialization.propertyList(from: bytes, options: [], format: &format) as? [String: Any])
        #expect(format == .binary)
        #expect(read["text"] as? String == "Documents/notes.txt")
        #expect(read["unicode"] as? String == "Ünïcødé ☃")
        #expect((read["count"] as? NSNumber)?.int64Value == 1_000_000)
        #expect((read["negative"] as? NSNumber)?.int64Value == -5)
        #expect(read["data"] as? Data == Data((0..<40).map(UInt8.init)))
        #expect((read["flag"] as? NSNumber)?.boolValue == true)
        #expect((read["when"] as? Date)?.timeIntervalSinceReferenceDate == 800_000_000.5)
        #expect((read["real"] as? NSNumber)?.doubleValue == 2.5)
        #expect((read["many"] as? [Any])?.count == 300)
        #expect(((read["nested"] as? [String: Any])?["empty"] as? [Any])?.isEmpty == true)
    }

    @Test("this reads what Foundation writes, and what it writes itself, UIDs included")
    func readsFoundation() throws {
        let foundation = try PropertyListSerialization.data(
            fromPropertyList: ["name": "MBFile", "size": 42, "tags": ["a", "b"], "blob": Data([1, 2, 3])] as [String: Any], format: .binary, options: 0)
        let read = try BinaryPropertyList.decode(foundation)
        #expect(read["name"]?.string == "MBFile" && read["size"]?.integer == 42)
        #expect(read["tags"]?.array == [.string("a"), .string("b")] && read["blob"]?.data == Data([1, 2, 3]))
        let archive: PropertyList = .dictionary([
            "$version": .integer(100_000), "$archiver": .string("NSKeyedArchiver"), "$top": .dictionary(["root": .uid(1)]),
            "$objects": .array([.string("$null"), .dictionary(["RelativePath": .uid(2), "$class": .uid(300)]), .string("Documents")]),
        ])
        #expect(try BinaryPropertyList.decode(BinaryPropertyList.encode(archive)) == archive)
        #expect(try BinaryPropertyList.decode(BinaryPropertyList.encode(Self.sample)) == Self.sample)
    }

    @Test("a keyed archive written by CPython's plistlib (the fuzz corpus's seed): its UIDs, data and nesting read as written")
    func readsPlistlib() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/bplist/mbfile.bplist")
        let archive = try BinaryPropertyList.decode(try Data(contentsOf: file))
        #expect(archive["$archiver"]?.string == "NSKeyedArchiver" && archive["$top"]?["root"]?.uid == 1)
        let objects = try #require(archive["$objects"]?.array)
        #expect(objects.count == 6 && objects[0].string == "$null")
        #expect(objects[1]["RelativePath"]?.uid == 2 && objects[1]["Mode"]?.integer == 0o100644 && objects[1]["$class"]?.uid == 5)
        #expect(objects[3]["NS.data"]?.data == Data([3, 0, 0, 0]) + Data(count: 40))
        #expect(objects[5]["$classes"]?.array == [.string("MBFile"), .string("NSObject")])
    }

    /// A binary plist of `objects` (already encoded), the first at the top.
    static func plist(_ objects: [[UInt8]], referenceSize: UInt8 = 1) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(bytes.count)
            bytes += object
        }
        let table = bytes.count
        for offset in offsets { bytes += (0..<4).map { UInt8(truncatingIfNeeded: offset >> (8 * (3 - $0))) } }
        func u64(_ n: Int) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: n >> (8 * (7 - $0))) } }
        bytes += [0, 0, 0, 0, 0, 0, 4, referenceSize] + u64(objects.count) + u64(0) + u64(table)
        return Data(bytes)
    }

    @Test("an object that contains itself, shared objects expanding past any size, and deep nesting are refused")
    func hostileStructures() {
        #expect(throws: PropertyListError.self) { try BinaryPropertyList.decode(Self.plist([[0xA1, 0x00]])) }
        // Twelve levels, each an array of fifteen references to the next: 15^12 values.
        let bomb = (0..<12).map { level in [0xAF, 0x10, 15] + [UInt8](repeating: UInt8(level + 1), count: 15) } + [[0x09]]
        #expect(throws: PropertyListError.self) { try BinaryPropertyList.decode(Self.plist(bomb)) }
        let deep = (0..<100).map { level in [0xA1, UInt8(level + 1)] } + [[0x08]]
        #expect(throws: PropertyListError.self) { try BinaryPropertyList.decode(Self.plist(deep)) }
    }

    @Test("one data object referenced 65,535 times (an 80 KB file that would expand to a gigabyte) is refused by its bytes")
    func sharedDataBomb() throws {
        let references: [UInt8] = [0xAF, 0x11, 0xFF, 0xFF] + [UInt8](repeating: 1, count: 0xFFFF)
        let data: [UInt8] = [0x4F, 0x11, 0x40, 0x00] + [UInt8](repeating: 0x41, count: 16 << 10)
        let file = Self.plist([references, data])
        #expect(file.count < 90_000)
        #expect {
            try BinaryPropertyList.decode(file)
        } throws: { "\($0)".contains("more bytes than a property list of its size holds") }
    }

    @Test("shared objects are decoded once and read as if copied; sharing cannot nest past the depth bound")
    func sharing() throws {
        // An array of three references to one string, and to one dictionary holding it.
        let shared = try BinaryPropertyList.decode(
            Self.plist([[0xA4, 1, 1, 2, 2], [0x53] + Array("abc".utf8), [0xD1, 1, 1]]))
        #expect(shared == .array([.string("abc"), .string("abc"), .dictionary(["abc": .string("abc")]), .dictionary(["abc": .string("abc")])]))
        // The top holds a chain 40 deep (objects 41 to 81) and a path 40 deep (1 to 40) that
        // ends in the same chain: read first near the top, the chain is met again at depth 41,
        // where it would nest past 64.
        var objects: [[UInt8]] = [[0xA2, 41, 1]]
        for index in 1...80 { objects.append([0xA1, UInt8(index == 40 ? 41 : index + 1)]) }
        objects.append([0x08])
        #expect {
            try BinaryPropertyList.decode(Self.plist(objects))
        } throws: { "\($0)".contains("nested deeper") }
    }

    @Test("every truncation and every single flipped byte of a real plist is an error or a value, never a trap")
    func damaged() {
        let bytes = BinaryPropertyList.encode(Self.sample)
        for length in 0..<bytes.count {
            #expect(throws: PropertyListError.self) { try BinaryPropertyList.decode(bytes.prefix(length)) }
        }
        for index in bytes.indices {
            var flipped = bytes
            flipped[index] ^= 0xFF
            _ = try? BinaryPropertyList.decode(flipped)
        }
    }

    @Test(
        "counts and references past the file are refused",
        arguments: [[0x4F, 0x13, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0xA3, 0x00, 0x05, 0x09], [0xD1, 0x00, 0x00], [0x5F, 0x10, 0xFF, 0x41]]
            as [[UInt8]])
    func outOfRange(object: [UInt8]) {
        #expect(throws: PropertyListError.self) { try BinaryPropertyList.decode(Self.plist([object])) }
    }
}
