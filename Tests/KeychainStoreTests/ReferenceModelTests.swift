import Foundation
import KeychainModel
import KeychainTesting
import Testing

@Suite("Engine against the reference model")
struct ReferenceModelTests {
    @Test("seeded random operation sequences give the same statuses and secrets", arguments: 1...12)
    func agreesWithModel(seed: UInt64) throws {
        let t = try TestDevice(grace: 10, seed: seed)
        let run = try ReferenceRun(seed: seed, device: t, through: TypedKeychain(try t.keychain()))
        #expect(run.disagreements.isEmpty, "\(run.disagreements.prefix(5))")
        // The run must have reached the interesting outcomes, or it proves little.
        for outcome in [KeychainStatus.success, .itemNotFound, .duplicateItem, .interactionNotAllowed] {
            #expect(run.seen[outcome, default: 0] > 0, "seed \(seed) never produced \(outcome)")
        }
    }
}
