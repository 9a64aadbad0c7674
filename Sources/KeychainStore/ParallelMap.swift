import Dispatch
import Foundation
import Synchronization

/// `map` over all cores for independent, CPU-bound work (sealing rows). Results keep the
/// input's order; the first error wins and the rest of the work is abandoned.
public enum ParallelMap {
    public static func map<Input: Sendable, Output: Sendable>(
        _ inputs: [Input], minimumChunk: Int = 256, _ transform: @Sendable (Input) throws -> Output
    ) throws -> [Output] {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard inputs.count >= 2 * minimumChunk, cores > 1 else { return try inputs.map(transform) }
        let chunkCount = min(cores * 4, inputs.count / minimumChunk)
        let chunkSize = (inputs.count + chunkCount - 1) / chunkCount
        let results = Mutex<[Int: [Output]]>([:])
        let failure = Mutex<(any Error)?>(nil)
        DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
            let range = min(inputs.count, chunk * chunkSize)..<min(inputs.count, (chunk + 1) * chunkSize)
            guard !range.isEmpty, failure.withLock({ $0 == nil }) else { return }
            do {
                let output = try inputs[range].map(transform)
                results.withLock { $0[chunk] = output }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return results.withLock { all in (0..<chunkCount).flatMap { all[$0] ?? [] } }
    }
}
