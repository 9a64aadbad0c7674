import Foundation
import KeychainModel
import Testing

@Suite("Restore report outcomes, packed")
struct RestoreOutcomesTests {
    /// Every class, protection and reason, with and without a name, in several groups.
    private var outcomes: [RestoreReport.ItemOutcome] {
        var all: [RestoreReport.ItemOutcome] = []
        for (index, itemClass) in ItemClass.allCases.enumerated() {
            for protection in ProtectionClass.allCases {
                for reason in [nil] + RestoreReport.Reason.allCases {
                    all.append(
                        RestoreReport.ItemOutcome(
                            uuid: UUID(), itemClass: itemClass, protection: protection, synchronizable: index % 2 == 0,
                            accessGroup: "TEAM\(index % 3).com.example.app", name: reason == .damaged ? nil : "user\(all.count) @ é-service",
                            reason: reason, waitingForApp: reason == nil && all.count % 4 == 0))
                }
            }
        }
        return all
    }

    @Test("every field reads back as appended, and the JSON is the array's, both ways")
    func roundTrip() throws {
        let values = outcomes
        var packed = RestoreReport.ItemOutcomes()
        packed += values.prefix(10)
        packed.append(contentsOf: values.dropFirst(10))
        #expect(packed.count == values.count)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for (read, written) in zip(packed, values) { #expect(try encoder.encode(read) == encoder.encode(written)) }
        #expect(packed.filter(\.restored).count == values.filter { $0.reason == nil }.count)
        let json = try encoder.encode(packed)
        #expect(json == (try encoder.encode(values)))
        let decoded = try JSONDecoder().decode(RestoreReport.ItemOutcomes.self, from: json)
        #expect(try encoder.encode(decoded) == json)
    }
}
