import ArgumentParser
import Backup
import Foundation
import KeychainStore  // members of a Device (its info, its calls), named by no type here
import Node
import NodeControl
import Survival

/// The survival matrix against one `backup create` of the same device, in the same run.
struct SurvivalBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "survival",
        abstract: "Time the survival matrix of a device against one backup create of it (run with -c release).",
        discussion: """
            A device of N items of every class and protection class. Target: the whole matrix \
            (twelve paths, side by side where they can) in at most 15x one encrypted backup create. \
            With --scenarios DIR, also times `keyferry scenario run` of every file there.
            """)

    @Option(help: "Items on the device.") var items = 10_000
    @Option(help: "Interleaved runs of each; medians are compared.") var runs = 3
    @Option(help: "A directory of scenario files to time (e.g. Peers/scenarios).", completion: .directory) var scenarios: String?
    @Option(help: "Directory for the scratch devices (default: a temporary directory).") var dir: String?
    @Flag(help: "Print the figures as JSON.") var json = false

    func validate() throws {
        guard items >= 0 else { throw ValidationError("--items must be zero or more.") }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1.") }
    }

    func run() async throws {
        let root = URL(fileURLWithPath: dir ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("keyferry-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let passcode = "123456"
        let device = try populatedBenchDevice(at: root.appendingPathComponent("phone"), passcode: passcode, items: items, sandboxMB: 0, biometry: true)
        defer { device.powerOff() }
        let archive = root.appendingPathComponent("phone.kfbackup")
        var backups: [Double] = []
        var matrices: [Double] = []
        var rows = 0
        for run in 0..<runs {
            let backup = {
                try? FileManager.default.removeItem(at: archive)
                backups.append(try seconds { try DeviceBackup.create(from: device, to: archive, mode: .encrypted(password: Data("bench".utf8))) })
            }
            if run % 2 == 0 { try backup() }
            let start = ContinuousClock.now
            rows = try await Survival.matrix(of: device, options: .init(passcode: passcode, scratch: root)).rows.count
            matrices.append((ContinuousClock.now - start) / .seconds(1))
            if run % 2 == 1 { try backup() }
        }
        var library: (files: Int, seconds: Double)?
        if let scenarios {
            let files = try FileManager.default.contentsOfDirectory(atPath: scenarios).filter { $0.hasSuffix(".yaml") }.sorted()
                .map { URL(fileURLWithPath: scenarios).appendingPathComponent($0).path }
            let elapsed = try seconds { try runQuietly(try KeyferryBinary.url(), ["scenario", "run"] + files) }
            library = (files.count, elapsed)
        }
        let backup = median(backups)
        let matrix = median(matrices)
        if json {
            var figures: [String: Any] = [
                "items": items, "rows": rows, "runs": runs, "backupSeconds": backup, "backupRuns": backups,
                "matrixSeconds": matrix, "matrixRuns": matrices, "ratio": matrix / backup,
            ]
            if let library {
                figures["scenarioFiles"] = library.files
                figures["scenarioSeconds"] = library.seconds
            }
            printJSON(figures)
            return
        }
        print("device: \(items) items of every class and protection class; medians of \(runs) interleaved runs")
        print(String(format: "backup create (encrypted)   %7.2f s   (= 1.00)", backup))
        print(String(format: "survival matrix             %7.2f s   %.2fx   (%d secrets x 12 paths; target <= 15x)", matrix, matrix / backup, rows))
        if let library { print(String(format: "scenario library            %7.2f s   (%d files, fresh nodes each)", library.seconds, library.files)) }
    }
}
