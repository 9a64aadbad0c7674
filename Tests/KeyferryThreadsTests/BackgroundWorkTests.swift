import KeyferryThreads
import Testing

@Suite("Background work")
struct BackgroundWorkTests {
    struct Refused: Error, Equatable {}

    // Waiting twice on a work that signals once would hang: the time limit turns that into a failure.
    @Test("its outcome, a value or an error, is waited for once and then returned to every caller", .timeLimit(.minutes(1)))
    func outcomeToEveryCaller() throws {
        let value = BackgroundWork { 42 }
        #expect(try value.result() == 42)
        #expect(try value.result() == 42, "a second call returns at once instead of waiting again")
        let failure = BackgroundWork { () throws -> Int in throw Refused() }
        #expect(throws: Refused.self) { try failure.result() }
        #expect(throws: Refused.self) { try failure.result() }
    }
}
