import Foundation
import KeychainModel
import Testing

/// The one struct behind the device's, the node's and the circle's failures.
@Suite("coded failures")
struct CodedFailureTests {
    /// Unavailable, yet never worth the same call again.
    enum Cautious: FailureDomain {
        static let name = "cautious"
        static func kind(of code: CodedFailure<Self>.Code) -> ProblemKind { .unavailable }
        static func isRetryable(_ code: CodedFailure<Self>.Code) -> Bool { false }
    }

    struct Underneath: Error, CustomStringConvertible {
        var description: String { "SQLite error 11: database disk image is malformed" }
    }

    @Test("the cause stays in the process: not in the sentence, not compared, not sent; a log reads it whole")
    func cause() throws {
        let failure = DeviceError(.internal, "the device failed inside", subject: "/tmp/phone", cause: Underneath())
        #expect(failure.message == "the device failed inside")
        #expect(failure == DeviceError(.internal, "the device failed inside", subject: "/tmp/phone"))
        let sent = try JSONEncoder().encode(failure)
        #expect(!String(decoding: sent, as: UTF8.self).contains("SQLite"))
        let received = try JSONDecoder().decode(DeviceError.self, from: sent)
        #expect(received == failure && received.cause == nil && received.subject == "/tmp/phone")
        #expect(failure.detailedDescription == "the device failed inside (caused by Underneath: SQLite error 11: database disk image is malformed)")

        // A cause that has a cause of its own is read down to the bottom.
        let wrapped = DeviceError(.io, "the restore stopped", cause: failure)
        #expect(wrapped.detailedDescription.hasSuffix("(caused by Underneath: SQLite error 11: database disk image is malformed))"))
    }

    @Test("each family keeps its domain, its codes' kinds and its retry rule")
    func families() {
        #expect(DeviceError.domain == "device" && DeviceError(.inUse, "").kind == .unavailable && DeviceError(.inUse, "").isRetryable)
        #expect(DeviceError(.appNotInstalled, "").kind == .notFound && DeviceError(.appNotInstalled, "").codeName == "appNotInstalled")
        // A family may narrow the retry rule, as the circle's does for keys that may never come.
        let cautious = CodedFailure<Cautious>(.init(rawValue: "keysUnavailable"), "")
        #expect(cautious.kind == .unavailable && !cautious.isRetryable)
        // Codes are open: a layer above adds its own, which read as failures.
        let added = DeviceError(DeviceError.Code(rawValue: "somethingNew"), "")
        #expect(added.kind == .failure && added.codeName == "somethingNew")
    }
}
