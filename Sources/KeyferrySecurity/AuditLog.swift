public import Foundation
public import KeychainModel
import KeyferrySystem

/// The traps recorded on one device: `audit.jsonl` in its directory, one JSON record per line.
/// Every process calling Keychain Services on the device appends to it (lines are appended
/// whole, so processes do not interleave), and `keyferry audit` reads it.
public struct AuditLog: Sendable {
    public let file: URL
    /// Past this size nothing more is recorded: a loop that falls into a trap a million times
    /// has said what it had to say, and the device's disk is left alone.
    public static let capacity = 8 << 20

    public init(device directory: URL) {
        file = DeviceLayout(root: directory).auditLog
    }

    /// Appends `records`; a full or unwritable log drops them (an audit never fails the call it
    /// watches).
    func append(_ records: [TrapRecord]) {
        guard !records.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = .sortedKeys
        var lines = Data()
        for record in records {
            guard let line = try? encoder.encode(record) else { continue }
            lines += line + Data("\n".utf8)
        }
        guard let handle = try? FileHandle.appending(to: file), let size = try? handle.seekToEnd(), size + UInt64(lines.count) <= UInt64(Self.capacity) else {
            return
        }
        try? handle.write(contentsOf: lines)
    }

    /// Every record, grouped by trap and place in the caller's code.
    public func read() throws -> AuditReport {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch CocoaError.fileReadNoSuchFile {
            return AuditReport(findings: [], calls: 0, unreadableLines: 0)
        } catch {
            throw DeviceError(.io, "cannot read \(file.path): \(error.localizedDescription)")
        }
        guard data.count <= Self.capacity + (1 << 20) else {
            throw DeviceError(.io, "\(file.path) is \(data.count) bytes, more than an audit log grows to; clear it.")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        var records: [TrapRecord] = []
        var unreadable = 0
        for line in data.split(separator: UInt8(ascii: "\n")) {
            if let record = try? decoder.decode(TrapRecord.self, from: Data(line)) { records.append(record) } else { unreadable += 1 }
        }
        return AuditReport(records, unreadableLines: unreadable)
    }

    /// Forgets every record (between two runs of a test suite).
    public func clear() throws {
        do {
            try FileManager.default.removeItem(at: file)
        } catch CocoaError.fileNoSuchFile {
        } catch {
            throw DeviceError(.io, "cannot remove \(file.path): \(error.localizedDescription)")
        }
    }
}

/// What an audit log holds: each trap at each place in the code, with how often it was hit.
public struct AuditReport: Codable, Sendable {
    public struct Finding: Codable, Sendable, Equatable {
        public var trap: KeychainTrap
        public var title: String
        public var why: String
        public var file: String
        public var line: Int
        public var function: SecItemFunction
        public var count: Int
        public var apps: [String]
        /// The first call's detail, when the trap has one.
        public var detail: String?
        public var first: Date
        public var last: Date
    }

    /// Most frequent first; then by place in the code.
    public var findings: [Finding]
    /// How many trapped calls were recorded, all findings together.
    public var calls: Int
    /// Lines of the log that were not records (a write cut short); they are skipped.
    public var unreadableLines: Int

    init(findings: [Finding], calls: Int, unreadableLines: Int) {
        self.findings = findings
        self.calls = calls
        self.unreadableLines = unreadableLines
    }

    init(_ records: [TrapRecord], unreadableLines: Int) {
        var byPlace: [String: Finding] = [:]
        for record in records {
            let place = "\(record.trap.rawValue) \(record.file):\(record.line)"
            var finding =
                byPlace[place]
                ?? Finding(
                    trap: record.trap, title: record.trap.title, why: record.trap.why, file: record.file, line: record.line,
                    function: record.function, count: 0, apps: [], detail: record.detail, first: record.at, last: record.at)
            finding.count += 1
            if !finding.apps.contains(record.app) { finding.apps.append(record.app) }
            finding.first = min(finding.first, record.at)
            finding.last = max(finding.last, record.at)
            byPlace[place] = finding
        }
        findings = byPlace.values.sorted { ($1.count, $0.file, $0.line, $0.trap.rawValue) < ($0.count, $1.file, $1.line, $1.trap.rawValue) }
        calls = records.count
        self.unreadableLines = unreadableLines
    }
}
