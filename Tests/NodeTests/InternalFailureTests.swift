import KeychainModel
import NodeControl
import Testing

@testable import Node

/// What a node answers for a failure Keyferry did not foresee (a database error, say).
@Suite("a node's unforeseen failures")
struct InternalFailureTests {
    struct Underneath: Error, CustomStringConvertible {
        var description: String { "SQLite error 10: disk I/O error at /private/path" }
    }

    @Test("the device's failure, not the caller's: its type named, its words kept for the node's log, not the answer")
    func unforeseen() throws {
        let failure = NodeAPI.Failure(Underneath())
        let error = try #require(failure.error as? DeviceError)
        #expect(error.code == .internal && error.kind == .failure)
        #expect(error.message.contains("Underneath") && !error.message.contains("SQLite"), "\(error.message)")
        #expect(error.detailedDescription.contains("SQLite error 10"), "the log's line holds the cause")
        // A coded error goes as it is.
        let coded = NodeAPI.Failure(NodeError.invalidRequest("no"))
        #expect((coded.error as? NodeError) == NodeError.invalidRequest("no"))
    }
}
