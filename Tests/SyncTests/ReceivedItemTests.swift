import Foundation
import KeychainModel
import SyncWire
import Testing

/// What a member receives is checked as a local add is, before anything is written: a member's
/// bug or a hostile member cannot plant a version that wins every merge, or a record that
/// breaks every listing.
@Suite("Checks on received versions")
struct ReceivedItemTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    var item: SyncedItem { EnvelopeVector.item }

    @Test("a version within a day of this device's clock, with valid attributes and dates, is taken")
    func validItem() throws {
        try item.checkReceived(now: now)
        var ahead = item
        ahead.version = HybridTimestamp(milliseconds: UInt64((now.timeIntervalSince1970 + 23 * 3600) * 1000))
        try ahead.checkReceived(now: now)
    }

    @Test(
        "a version more than a day ahead is refused, up to the end of the clock's range",
        arguments: [HybridTimestamp(milliseconds: .max, counter: .max), HybridTimestamp(milliseconds: 1_790_000_000_000 + 25 * 3_600_000)])
    func farFuture(version: HybridTimestamp) {
        var future = item
        future.version = version
        #expect { try future.checkReceived(now: now) } throws: { error in
            guard case .inconsistent(let why)? = error as? EnvelopeError else { return false }
            return why.contains("more than a day ahead")
        }
    }

    @Test("a date that is not a time is refused, in the record's dates or an attribute")
    func nonFiniteDates() {
        var nan = item
        nan.record.creationDate = Date(timeIntervalSinceReferenceDate: .nan)
        #expect(throws: EnvelopeError.self) { try nan.checkReceived(now: now) }
        var infinite = item
        infinite.record.modificationDate = Date(timeIntervalSinceReferenceDate: .infinity)
        #expect(throws: EnvelopeError.self) { try infinite.checkReceived(now: now) }
    }

    @Test("an attribute the class does not have, or a value of the wrong kind, is refused")
    func attributes() {
        var unknown = item
        unknown.record.attributes[AttributeKey(rawValue: "zzzz")] = .string("x")
        #expect(throws: EnvelopeError.self) { try unknown.checkReceived(now: now) }
        var wrongKind = item
        wrongKind.record.attributes[.account] = .number(7)
        #expect(throws: EnvelopeError.self) { try wrongKind.checkReceived(now: now) }
    }
}
