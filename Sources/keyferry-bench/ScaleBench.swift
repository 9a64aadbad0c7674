import ArgumentParser
import Backup
import Foundation
import GRDB
import KeychainModel
import KeychainStore
import KeyferryCrypto

/// How cost grows with the size of a device: each operation at each size, as time per item and
/// the peak memory it added.
struct ScaleBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Time per item and peak memory of each operation at 10,000, 100,000 and 1,000,000 items (run with -c release).",
        discussion: """
            At each size: the floor, rows shaped like the keychain's inserted into plain SQLite \
            5,000 to a transaction; a bulk import of the items into a new device; 1,000 adds and 1,000 \
            copies by primary key (with data) on that device; a backup of it (encrypted, its \
            password hashed at libsodium's minimum so that a fixed cost does not hide the cost \
            per item); a verify of the archive; its restore onto a new device; three members \
            converging on that many synchronizable items through a relay; and then a fourth \
            member's first sync of them, into its empty keychain. Peak memory is what the \
            operation added to the process's resident set at its highest (VmHWM, reset before \
            each). Targets: the time per item of a restore and of a new member's first sync at the \
            largest size within 1.5x of the smallest, and the peak memory of backup, restore and \
            sync not growing with the item count.
            """)

    @Option(help: "Item counts, comma-separated.") var sizes = "10000,100000,1000000"
    @Option(help: "Write a plot of time per item against size to this SVG file.") var svg: String?
    @Option(
        help: ArgumentHelp(
            "Only these operations, comma-separated (\(operations.joined(separator: ", "))).",
            discussion: "What an operation needs runs too, unmeasured: a backup needs a bulk import, a verify or restore a backup."))
    var only: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    var counts: [Int] { sizes.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    /// The operations to measure.
    var measured: Set<String> {
        guard let only else { return Set(Self.operations) }
        return Set(only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    func validate() throws {
        guard !counts.isEmpty, counts.allSatisfy({ $0 >= 1_000 }), counts.count == sizes.split(separator: ",").count else {
            throw ValidationError("--sizes takes item counts of at least 1000, comma-separated, e.g. 10000,100000.")
        }
        let unknown = measured.subtracting(Self.operations)
        guard unknown.isEmpty, !measured.isEmpty else {
            throw ValidationError("--only takes operations among \(Self.operations.joined(separator: ", ")); not \(unknown.sorted().joined(separator: ", ")).")
        }
    }

    /// One operation at one size.
    struct Figure: Codable {
        var operation: String
        var items: Int
        var seconds: Double
        var microsecondsPerItem: Double
        var peakMegabytes: Double
    }

    static let operations = ["floor: insert", "bulk import", "add", "copy", "backup", "verify", "restore", "sync", "first sync"]
    /// The operations whose time per item must stay within 1.5x from the smallest size to the largest.
    static let flatTargets: Set = ["restore", "first sync"]

    func run() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("keyferry-scale-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        var figures: [Figure] = []
        for count in counts.sorted() {
            let directory = root.appendingPathComponent("\(count)")
            figures += try await measure(count, in: directory)
            try? FileManager.default.removeItem(at: directory)
            if !json { FileHandle.standardError.write(Data("measured \(count) items\n".utf8)) }
        }
        if let svg { try Plot(figures: figures).svg.write(toFile: svg, atomically: true, encoding: .utf8) }
        if json {
            try printJSON(encodable: figures)
            return
        }
        print(table(figures))
    }

    /// Every operation at `count` items, in the order they depend on each other.
    private func measure(_ count: Int, in directory: URL) async throws -> [Figure] {
        var figures: [Figure] = []
        let measured = measured
        func record(_ operation: String, per items: Int, _ body: () throws -> Void) throws {
            guard measured.contains(operation) else { return try body() }
            let (elapsed, peak) = try PeakMemory.measure { try seconds(body) }
            figures.append(
                Figure(operation: operation, items: count, seconds: elapsed, microsecondsPerItem: elapsed / Double(items) * 1e6, peakMegabytes: peak))
        }
        let needsArchive = !measured.isDisjoint(with: ["backup", "verify", "restore"])
        let needsDevice = needsArchive || !measured.isDisjoint(with: ["bulk import", "add", "copy"])
        // Passcodes hashed at libsodium's minimum, so the fixed cost of an unlock does not hide
        // the cost per item.
        let passcode = "123456"
        let options = DeviceOptions(name: "Bench iPhone", passcode: passcode, passcodeHashing: .minimum)
        // The floor: rows of the keychain's shape (two random unique keys, a sequence index)
        // inserted as the import inserts them, 5,000 to a transaction, with the store's cache.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if measured.contains("floor: insert") {
            let floor = try PlainSQLite(at: directory.appendingPathComponent("floor.db"), keychainShape: true)
            try await floor.queue.writeWithoutTransaction { try $0.execute(sql: "PRAGMA cache_size = -32768") }
            let rows = ShapedRows(count: count)
            try record("floor: insert", per: count) {
                for first in stride(from: 0, to: count, by: 5_000) { try floor.insertShaped(rows, first..<min(first + 5_000, count)) }
            }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent("floor.db"))
        }
        if needsDevice { try measureDevice(count, in: directory, options: options, archive: needsArchive, record: record) }
        if !measured.isDisjoint(with: ["sync", "first sync"]) {
            PeakMemory.reset()
            let before = PeakMemory.now().resident
            let sync = try await convergence(of: count, in: directory.appendingPathComponent("sync"), thenJoining: measured.contains("first sync"))
            // One high-water mark for both: the second runs while the first's caches are still held.
            let peak = Double(PeakMemory.now().peak - before) / 1e6
            if measured.contains("sync") {
                figures.append(
                    Figure(
                        operation: "sync", items: count, seconds: sync.converged, microsecondsPerItem: sync.converged / Double(count) * 1e6, peakMegabytes: peak
                    ))
            }
            if let first = sync.firstSync {
                figures.append(
                    Figure(operation: "first sync", items: count, seconds: first, microsecondsPerItem: first / Double(count) * 1e6, peakMegabytes: peak))
            }
        }
        return figures
    }

    /// The operations on one device of `count` items, and with `archive` on its archive.
    private func measureDevice(
        _ count: Int, in directory: URL, options: DeviceOptions, archive needsArchive: Bool,
        record: (_ operation: String, _ perItems: Int, _ body: () throws -> Void) throws -> Void
    ) throws {
        let passcode = options.passcode
        let source = directory.appendingPathComponent("phone")
        let device = try Device.create(at: source, options: options)
        try record("bulk import", count) { try populate(device, items: count, sandboxMB: 0) }
        let keychain = try device.keychain(for: "com.example.app0")
        let probes = 1_000
        try record("add", probes) {
            for index in 0..<probes {
                try keychain.add(
                    NewItem(.genericPassword, attributes: [.account: .string("added\(index)"), .service: .string("scale")], data: Data(count: 256)))
            }
        }
        // Generic passwords of the first app: index 0 mod 3, in its first batch of 5,000.
        let accounts = stride(from: 0, to: min(count, 5_000), by: 3).map { "user\($0)" }
        try record("copy", probes) {
            for index in 0..<probes {
                let query = ItemQuery(
                    .genericPassword, attributes: [.account: .string(accounts[index % accounts.count]), .service: .string("bench")], returning: .data)
                _ = try keychain.copy(query)
            }
        }
        guard needsArchive else { return device.powerOff() }
        let archive = directory.appendingPathComponent("phone.kfbackup")
        let password = Data("scale password".utf8)
        try record("backup", count) { try DeviceBackup.create(from: device, to: archive, mode: .encrypted(password: password, parameters: .minimum)) }
        device.powerOff()
        try? FileManager.default.removeItem(at: source)
        try record("verify", count) { _ = try ArchiveReader(contentsOf: archive).read(password: password) }
        let target = directory.appendingPathComponent("new-phone")
        try Device.initialize(at: target, options: options)
        try record("restore", count) {
            _ = try DeviceRestore.restore(archive, password: password, to: target, passcode: passcode, acceptingUnauthenticated: true)
        }
        try? FileManager.default.removeItem(at: target)
        try? FileManager.default.removeItem(at: archive)
    }

    private func table(_ figures: [Figure]) -> String {
        let sizes = counts.sorted()
        let header = sizes.map { "\($0) items".leftPadded(to: 24) }.joined()
        var lines = ["operation     " + header + "   largest/smallest per item"]
        for operation in Self.operations where measured.contains(operation) {
            let row = sizes.map { size in figures.first { $0.operation == operation && $0.items == size } }
            let cells = row.map { figure in
                figure.map { String(format: "%11.2f µs %7.1f MB", $0.microsecondsPerItem, $0.peakMegabytes) } ?? String(repeating: " ", count: 24)
            }
            var line = operation.padding(toLength: 14, withPad: " ", startingAt: 0) + cells.joined()
            if let first = row.first??.microsecondsPerItem, let last = row.last??.microsecondsPerItem, row.count > 1 {
                line += String(format: "   %.2fx", last / first)
                if Self.flatTargets.contains(operation) { line += " (target <= 1.50x)" }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}

/// The process's resident memory, and its high-water mark, which Linux resets on request.
enum PeakMemory {
    /// Bytes resident now, and at most since the last reset.
    static func now() -> (resident: Int, peak: Int) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func kilobytes(_ field: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return (kilobytes("VmRSS"), kilobytes("VmHWM"))
    }

    /// Sets the high-water mark to what is resident now (Linux's `clear_refs` value 5).
    static func reset() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// `body`'s result, and the megabytes it added to the resident set at its highest.
    static func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        reset()
        let before = now().resident
        let result = try body()
        return (result, Double(now().peak - before) / 1e6)
    }
}

/// Time per item against size, one line per operation, both axes logarithmic.
struct Plot {
    let figures: [ScaleBench.Figure]

    var svg: String {
        let (width, height, left, right, top, bottom) = (760.0, 440.0, 70.0, 170.0, 30.0, 50.0)
        let sizes = Set(figures.map(\.items)).sorted()
        let values = figures.map(\.microsecondsPerItem).filter { $0 > 0 }
        guard let minSize = sizes.first, let maxSize = sizes.last, let low = values.min(), let high = values.max() else {
            return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>"
        }
        let (yLow, yHigh) = (floor(log10(low)), ceil(log10(high)))
        let xSpan = max(log10(Double(maxSize)) - log10(Double(minSize)), 1)
        func x(_ size: Int) -> Double { left + (log10(Double(size)) - log10(Double(minSize))) / xSpan * (width - left - right) }
        func y(_ value: Double) -> Double { top + (yHigh - log10(value)) / max(yHigh - yLow, 1) * (height - top - bottom) }
        let colors = ["#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
        var parts = [
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" font-family=\"sans-serif\" font-size=\"12\">",
            "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
            "<text x=\"\(left)\" y=\"18\" font-size=\"14\">Time per item against the number of items (both axes logarithmic)</text>",
        ]
        for exponent in stride(from: yLow, through: yHigh, by: 1) {
            let value = pow(10, exponent)
            parts.append("<line x1=\"\(left)\" x2=\"\(width - right)\" y1=\"\(y(value))\" y2=\"\(y(value))\" stroke=\"#ddd\"/>")
            parts.append(
                "<text x=\"\(left - 8)\" y=\"\(y(value) + 4)\" text-anchor=\"end\">\(value < 1 ? String(format: "%.1f", value) : String(Int(value))) µs</text>")
        }
        for size in sizes {
            parts.append("<line x1=\"\(x(size))\" x2=\"\(x(size))\" y1=\"\(top)\" y2=\"\(height - bottom)\" stroke=\"#ddd\"/>")
            parts.append("<text x=\"\(x(size))\" y=\"\(height - bottom + 18)\" text-anchor=\"middle\">\(size.formatted())</text>")
        }
        parts.append("<text x=\"\((left + width - right) / 2)\" y=\"\(height - 12)\" text-anchor=\"middle\">items on the device</text>")
        for (index, operation) in ScaleBench.operations.enumerated() {
            let points = figures.filter { $0.operation == operation && $0.microsecondsPerItem > 0 }.sorted { $0.items < $1.items }
            guard !points.isEmpty else { continue }
            let color = colors[index % colors.count]
            let path = points.map { "\(x($0.items)),\(y($0.microsecondsPerItem))" }.joined(separator: " ")
            parts.append("<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"/>")
            for point in points { parts.append("<circle cx=\"\(x(point.items))\" cy=\"\(y(point.microsecondsPerItem))\" r=\"3\" fill=\"\(color)\"/>") }
            let legendY = top + 20 + Double(index) * 20
            parts.append(
                "<line x1=\"\(width - right + 15)\" x2=\"\(width - right + 35)\" y1=\"\(legendY)\" y2=\"\(legendY)\" stroke=\"\(color)\" stroke-width=\"2\"/>")
            parts.append("<text x=\"\(width - right + 40)\" y=\"\(legendY + 4)\">\(operation)</text>")
        }
        parts.append("</svg>")
        return parts.joined(separator: "\n") + "\n"
    }
}
