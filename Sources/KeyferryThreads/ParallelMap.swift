import Dispatch
import Foundation

/// `map` over all cores for independent, CPU-bound work (sealing rows). Results keep the
/// input's order; the first error wins and the rest of the work is abandoned.
package enum ParallelMap {
    package static func map<Input: Sendable, Output: Sendable>(
        _ inputs: [Input], minimumChunk: Int = 256, _ transform: @Sendable (Input) throws -> Output
    ) throws -> [Output] {
        try mapChunks(inputs, minimumChunk: minimumChunk) { try $0.map(transform) }.flatMap { $0 }
    }

    /// `transform` applied to consecutive pieces of `inputs` (at least `minimumChunk` long, but
    /// for the last), on every core: for work that carries state from one input to the next,
    /// such as packing entries into sections. One piece when there is too little to share.
    package static func mapChunks<Input: Sendable, Output: Sendable>(
        _ inputs: [Input], minimumChunk: Int = 256, _ transform: @Sendable (ArraySlice<Input>) throws -> Output
    ) throws -> [Output] {
        guard !inputs.isEmpty else { return [] }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard inputs.count >= 2 * minimumChunk, cores > 1 else { return [try transform(inputs[...])] }
        let chunkCount = min(cores * 4, inputs.count / minimumChunk)
        let chunkSize = (inputs.count + chunkCount - 1) / chunkCount
        let results = Locked<[Int: Output]>([:])
        let failure = Locked<(any Error)?>(nil)
        DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
            let range = min(inputs.count, chunk * chunkSize)..<min(inputs.count, (chunk + 1) * chunkSize)
            guard !range.isEmpty, failure.withLock({ $0 == nil }) else { return }
            do {
                let output = try transform(inputs[range])
                results.withLock { $0[chunk] = output }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return results.withLock { all in (0..<chunkCount).compactMap { all[$0] } }
    }
}
