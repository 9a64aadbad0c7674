import Foundation
import KeyferryCompression
import Testing

@Suite("zstd")
struct ZstdTests {
    @Test("a frame round-trips and compresses repetitive input")
    func roundTrip() throws {
        let input = Data(String(repeating: "keyferry ", count: 10_000).utf8)
        let frame = try Zstd.compress(input)
        #expect(frame.count < input.count / 10)
        #expect(try Zstd.decompress(frame, limit: input.count) == input)
        #expect(try Zstd.decompress(try Zstd.compress(Data()), limit: 0) == Data())
    }

    @Test("garbage, truncated frames and frames over the limit are refused")
    func refusals() throws {
        let frame = try Zstd.compress(Data(repeating: 7, count: 1_000))
        #expect(throws: CompressionError.self) { try Zstd.decompress(Data("not zstd".utf8), limit: 1_000) }
        #expect(throws: CompressionError.self) { try Zstd.decompress(frame.prefix(frame.count - 2), limit: 1_000) }
        #expect(throws: CompressionError.self) { try Zstd.decompress(frame, limit: 999) }
    }
}
