package import Foundation

extension RestoreReport {
    /// Every item's outcome, packed: about 40 bytes an item where outcomes as values took about
    /// 100, so a restore of a million items reports every one of them in tens of megabytes.
    /// Read as a collection of `ItemOutcome`; encoded as their array.
    public struct ItemOutcomes: RandomAccessCollection, Sendable, Codable {
        /// Per outcome: `uuid (16) | class u8 | protection u8 | flags u8 | reason u8 | group u32`
        /// then, with a name, `u32 length | UTF-8`. Codes are positions in `allCases`, the
        /// reason's plus one (0: none); a group is a position in `groups`.
        private var packed: [UInt8] = []
        private var starts: [Int] = []
        /// Each access group once: a restore's items share a handful.
        private var groups: [String] = []
        private var groupPositions: [String: UInt32] = [:]

        private static let classes = ItemClass.allCases
        private static let protections = ProtectionClass.allCases
        private static let reasons = Reason.allCases

        private enum Flag {
            static let synchronizable: UInt8 = 1
            static let restored: UInt8 = 2
            static let waitingForApp: UInt8 = 4
            static let named: UInt8 = 8
        }

        public init() {}

        public var startIndex: Int { 0 }
        public var endIndex: Int { starts.count }

        public subscript(position: Int) -> ItemOutcome {
            // Written by `append` alone, so it reads back whole.
            var r = ByteReader(packed[starts[position]...])
            let uuid = try! r.uuid()
            let (itemClass, protection, flags, reason) = (try! r.uint8(), try! r.uint8(), try! r.uint8(), try! r.uint8())
            let group = groups[Int(try! r.uint32())]
            let name = flags & Flag.named == 0 ? nil : String(decoding: try! r.lengthPrefixed(), as: UTF8.self)
            var outcome = ItemOutcome(
                uuid: uuid, itemClass: Self.classes[Int(itemClass)], protection: Self.protections[Int(protection)],
                synchronizable: flags & Flag.synchronizable != 0, accessGroup: group, name: name,
                reason: reason == 0 ? nil : Self.reasons[Int(reason) - 1], waitingForApp: flags & Flag.waitingForApp != 0)
            outcome.restored = flags & Flag.restored != 0
            return outcome
        }

        public mutating func append(_ outcome: ItemOutcome) {
            starts.append(packed.count)
            withUnsafeBytes(of: outcome.uuid.uuid) { packed.append(contentsOf: $0) }
            packed.append(UInt8(Self.classes.firstIndex(of: outcome.itemClass)!))
            packed.append(UInt8(Self.protections.firstIndex(of: outcome.protection)!))
            var flags: UInt8 = outcome.synchronizable ? Flag.synchronizable : 0
            if outcome.restored { flags |= Flag.restored }
            if outcome.waitingForApp { flags |= Flag.waitingForApp }
            if outcome.name != nil { flags |= Flag.named }
            packed.append(flags)
            packed.append(outcome.reason.map { UInt8(Self.reasons.firstIndex(of: $0)! + 1) } ?? 0)
            let group =
                groupPositions[outcome.accessGroup]
                ?? {
                    groups.append(outcome.accessGroup)
                    groupPositions[outcome.accessGroup] = UInt32(groups.count - 1)
                    return UInt32(groups.count - 1)
                }()
            append(group)
            if let name = outcome.name {
                append(UInt32(name.utf8.count))
                packed.append(contentsOf: name.utf8)
            }
        }

        private mutating func append(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { packed.append(contentsOf: $0) } }

        public mutating func append(contentsOf outcomes: some Sequence<ItemOutcome>) {
            for outcome in outcomes { append(outcome) }
        }

        public static func += (outcomes: inout ItemOutcomes, more: some Sequence<ItemOutcome>) { outcomes.append(contentsOf: more) }

        /// Not restored after all, for `reason`: the first restored outcome of each of `uuids`,
        /// once for each time it is named, in order (what a later item of the same backup
        /// replaced). One pass over the outcomes.
        package mutating func replace(_ uuids: [UUID], with reason: RestoreReport.Reason) {
            var left = uuids.reduce(into: [UUID: Int]()) { $0[$1, default: 0] += 1 }
            let code = UInt8(Self.reasons.firstIndex(of: reason)! + 1)
            for start in starts where !left.isEmpty {
                let uuid = packed.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(fromByteOffset: start, as: uuid_t.self)) }
                guard let count = left[uuid], packed[start + 18] & Flag.restored != 0 else { continue }
                packed[start + 18] &= ~(Flag.restored | Flag.waitingForApp)
                packed[start + 19] = code
                left[uuid] = count == 1 ? nil : count - 1
            }
        }

        public init(from decoder: any Decoder) throws {
            append(contentsOf: try [ItemOutcome](from: decoder))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            for outcome in self { try container.encode(outcome) }
        }
    }
}
