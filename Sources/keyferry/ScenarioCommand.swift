import ArgumentParser
import Fleet
import Foundation
import KeychainModel
import KeyferryThreads
import NodeControl
import Scenario

struct ScenarioCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenario",
        abstract: "Check what must survive: run scenario files on fresh devices.",
        discussion: "The format is in Protocol/scenario.md; a library of scenarios is in Peers/scenarios/.",
        subcommands: [Run.self])

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Run scenario files, each on fresh devices, and check every expectation.",
            discussion: """
                Each scenario gets fresh devices as real node processes, its own relay when it syncs, \
                and a line per step; every node is stopped at the end, also on a failure or Ctrl-C. \
                Every file is checked before anything starts.

                Exit status: 0 every expectation holds; 1 one failed (the step, what was expected and \
                what came back); 64 a malformed file (FILE:LINE:COLUMN: field: problem, nothing \
                started); 5 a file that is not there. With --json, a malformed file's problems are \
                listed under "problems".
                """)

        @Argument(help: "Scenario files (YAML).", completion: .file()) var files: [String]
        @Option(help: "Also write the results as JUnit XML to FILE, for CI systems.", completion: .file()) var junit: String?
        @Option(help: "Keep each scenario's devices under DIR (stopped) instead of removing them.", completion: .directory) var keep: String?
        @OptionGroup var output: OutputOptions

        func run() async throws {
            var scenarios: [Scenario] = []
            var problems: [FleetFileError] = []
            for file in files {
                do {
                    scenarios.append(try Scenario.load(URL(fileURLWithPath: file), displayName: file))
                } catch let error as FleetFileError {
                    problems.append(error)
                } catch let errors as FleetFileErrors {
                    problems += errors.errors
                }
            }
            guard problems.isEmpty else { throw FileProblems(errors: problems) }
            // Where each scenario's devices go, all checked before anything starts.
            let roots = try scenarios.indices.map { try root(for: scenarios[$0], index: $0) }
            var results: [ScenarioResult] = []
            let human = !output.json && Verbosity.current >= .normal
            for (scenario, root) in zip(scenarios, roots) {
                if human { printNow("scenario: \(scenario.name) (\(scenario.file))") }
                try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
                // The runner has stopped every node by the time it returns or throws.
                defer { if keep == nil { try? FileManager.default.removeItem(at: root) } }
                let started = ContinuousClock.now
                let done = Locked<[StepResult]>([])
                let result: ScenarioResult
                do {
                    result = try await interruptibly {
                        try await ScenarioRunner(scenario: scenario, root: root).run { step in
                            done.withLock { $0.append(step) }
                            guard human else { return }
                            printNow("  \(step.passed ? "ok  " : "FAIL") \(String(step.line).padded(4)) \(step.step)")
                            if let failure = step.failure { printNow("       " + failure.replacingOccurrences(of: "\n", with: "\n       ")) }
                        }
                    }
                } catch is Interrupted {
                    // CI still gets its report: the scenarios that ran, and how far this one got.
                    let elapsed = started.duration(to: .now)
                    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                    try writeJUnit(results + [.interrupted(scenario, after: done.withLock { $0 }, seconds: seconds)])
                    throw Interrupted(cause: CommandFailure("every device and relay of \"\(scenario.name)\" was stopped"))
                }
                results.append(result)
            }
            try writeJUnit(results)
            let failed = results.filter { !$0.passed }
            if output.json {
                try printJSON(encodable: results)
            } else {
                let seconds = String(format: "%.1f", results.map(\.seconds).reduce(0, +))
                say(
                    "\(results.count - failed.count) of \(results.count.items(as: "scenario")) passed (\(seconds) s)"
                        + (failed.isEmpty ? "" : "; failed: " + failed.map(\.name).joined(separator: ", ")))
            }
            if !failed.isEmpty { throw ExitCode.failure }
        }

        private func writeJUnit(_ results: [ScenarioResult]) throws {
            guard let junit else { return }
            do {
                try Data(JUnitReport.xml(results).utf8).write(to: URL(fileURLWithPath: junit), options: .atomic)
            } catch {
                throw CommandFailure("cannot write \(junit): \(userMessage(for: error).message)")
            }
        }

        /// Where a scenario's devices go: a scratch directory, or one named after it under --keep,
        /// which an earlier run must not have left there.
        private func root(for scenario: Scenario, index: Int) throws -> URL {
            let base = keep.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
            let root = base.appendingPathComponent(
                keep == nil ? "keyferry-scenario-\(UUID().uuidString.prefix(8))" : "\(index + 1)-\(scenario.slug.prefix(24))")
            guard !FileManager.default.fileExists(atPath: root.path) else {
                throw CommandFailure(
                    .invalidInput, "--keep \(keep ?? ""): \(root.lastPathComponent) is there from an earlier run; give --keep a new or empty directory.")
            }
            return root
        }
    }
}
