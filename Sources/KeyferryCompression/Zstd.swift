internal import CZstd
package import Foundation

/// Why a zstd frame could not be made or read.
package struct CompressionError: Error, Equatable, Sendable, CustomStringConvertible {
    package let description: String
}

/// zstd frames, the only code that calls libzstd. Frames carry their decompressed size, so
/// readers can refuse one that claims more than they are willing to allocate.
package enum Zstd {
    package static let defaultLevel: Int32 = 3

    package static func compress(_ input: some ContiguousBytes, level: Int32 = defaultLevel) throws -> Data {
        try input.withUnsafeBytes { source in
            let bound = ZSTD_compressBound(source.count)
            var out = Data(count: bound)
            let written = out.withUnsafeMutableBytes { dest in
                ZSTD_compress(dest.baseAddress, bound, source.baseAddress, source.count, level)
            }
            try check(written, "compressing")
            out.count = written
            return out
        }
    }

    /// Decompresses one frame; `limit` caps the size the frame may claim.
    package static func decompress(_ frame: some ContiguousBytes, limit: Int) throws -> Data {
        try frame.withUnsafeBytes { source in
            let size = ZSTD_getFrameContentSize(source.baseAddress, source.count)
            guard size != ZSTD_CONTENTSIZE_ERROR, size != ZSTD_CONTENTSIZE_UNKNOWN else {
                throw CompressionError(description: "not a zstd frame with a recorded size")
            }
            guard size <= UInt64(limit) else {
                throw CompressionError(description: "frame claims \(size) bytes, more than the \(limit) allowed")
            }
            var out = Data(count: Int(size))
            let written = out.withUnsafeMutableBytes { dest in
                ZSTD_decompress(dest.baseAddress, dest.count, source.baseAddress, source.count)
            }
            try check(written, "decompressing")
            guard written == Int(size) else {
                throw CompressionError(description: "frame decompressed to \(written) bytes, not the \(size) it claims")
            }
            return out
        }
    }

    private static func check(_ result: Int, _ action: String) throws {
        if ZSTD_isError(result) != 0 {
            throw CompressionError(description: "zstd failed while \(action): \(String(cString: ZSTD_getErrorName(result)))")
        }
    }
}
