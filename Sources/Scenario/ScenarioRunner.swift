import Backup
import Fleet
package import Foundation
import KeychainModel
import KeyferrySecurity
import KeyferryThreads
import Node
import NodeControl
import PhoneBackup
import Survival
import Sync
import SyncWire

/// What one step did.
package struct StepResult: Codable, Sendable {
    package var line: Int
    package var step: String
    package var passed: Bool
    /// For a failed step: what was expected and what came back.
    package var failure: String?
    package var seconds: Double
}

/// What one scenario did: every step up to the first failure.
package struct ScenarioResult: Codable, Sendable {
    package var name: String
    package var file: String
    package var source: String?
    package var steps: [StepResult]
    package var seconds: Double
    package var passed: Bool { steps.allSatisfy(\.passed) }
    package var failure: StepResult? { steps.first { !$0.passed } }

    /// A scenario stopped by Ctrl-C or SIGTERM after `steps`: failed at an "interrupted" step,
    /// so that a CI report still says how far it got.
    package static func interrupted(_ scenario: Scenario, after steps: [StepResult], seconds: Double) -> ScenarioResult {
        let stop = StepResult(
            line: scenario.steps.dropFirst(steps.count).first?.line ?? 0, step: "interrupted", passed: false,
            failure: "stopped by Ctrl-C or SIGTERM; every device and relay was stopped", seconds: 0)
        return ScenarioResult(name: scenario.name, file: scenario.file, source: scenario.source, steps: steps + [stop], seconds: seconds)
    }
}

/// Runs a scenario on fresh devices, each a real node process in `root`: brings its fleet up,
/// runs the steps in order until one fails, and stops every node and relay at the end, also
/// when it fails or is cancelled.
package struct ScenarioRunner: Sendable {
    package let scenario: Scenario
    package let root: URL
    package let executable: URL

    package init(scenario: Scenario, root: URL, executable: URL = NodeLauncher.currentExecutable) {
        self.scenario = scenario
        self.root = root
        self.executable = executable
    }

    /// The password of the scenario's encrypted archives: they never leave its directory.
    static let archivePassword = Data("keyferry-scenario".utf8)

    package func run(progress: @escaping @Sendable (StepResult) -> Void = { _ in }) async throws -> ScenarioResult {
        let started = ContinuousClock.now
        let fleet = FleetRunner(fleet: scenario.fleet, root: root, executable: executable)
        var results: [StepResult] = []
        do {
            _ = try await fleet.up()
            let state = RunState(scenario: scenario, fleet: fleet, executable: executable)
            for step in scenario.steps {
                try Task.checkCancellation()
                let stepStart = ContinuousClock.now
                var result = StepResult(line: step.line, step: step.summary, passed: true, failure: nil, seconds: 0)
                do {
                    try await state.perform(step.action)
                } catch let failure as ExpectationFailure {
                    result.passed = false
                    result.failure = failure.description
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    result.passed = false
                    result.failure = "\(error)"
                }
                result.seconds = (ContinuousClock.now - stepStart) / .seconds(1)
                results.append(result)
                progress(result)
                if !result.passed { break }
            }
        } catch {
            await Self.stop(fleet)
            throw error
        }
        await Self.stop(fleet)
        return ScenarioResult(
            name: scenario.name, file: scenario.file, source: scenario.source, steps: results,
            seconds: (ContinuousClock.now - started) / .seconds(1))
    }

    /// Stops every node and the relay, in a task of its own: a cancelled run still cleans up.
    private static func stop(_ fleet: FleetRunner) async {
        _ = try? await Task { try await fleet.down() }.value
    }
}

/// An expectation that did not hold: what was expected and what came back.
struct ExpectationFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The run's memory between steps: passcodes as they change, archives made, the last report.
actor RunState {
    let scenario: Scenario
    let fleet: FleetRunner
    let executable: URL
    private var passcodes: [String: String]
    private var archives: [String: (url: URL, encrypted: Bool, phone: Bool)] = [:]
    private var lastReport: [String] = []

    init(scenario: Scenario, fleet: FleetRunner, executable: URL) {
        self.scenario = scenario
        self.fleet = fleet
        self.executable = executable
        passcodes = Dictionary(uniqueKeysWithValues: scenario.fleet.members.compactMap { member in member.passcode.map { (member.id, $0) } })
    }

    private func directory(_ device: String) -> URL {
        fleet.directory(of: scenario.fleet.members.first { $0.id == device }!)
    }

    private func client(_ device: String, patient: Bool = false) -> NodeClient {
        NodeClient(directory: directory(device), timeout: patient ? .seconds(3600) : .seconds(60))
    }

    private func app(_ bundleID: String) -> AppManifest {
        scenario.fleet.members.lazy.flatMap(\.apps).first { $0.bundleID == bundleID }!
    }

    func perform(_ action: Scenario.Action) async throws {
        switch action {
        case .lock(let device, let now): try await client(device).send(.lock, NodeAPI.Lock(immediately: now))
        case .unlock(let device, let passcode):
            try await client(device).send(.unlock, NodeAPI.Unlock(passcode: passcode ?? passcodes[device]))
        case .reboot(let device): try await client(device).send(.reboot, NodeAPI.Empty())
        case .powerOff(let device): _ = try await NodeLauncher.stop(directory: directory(device))
        case .powerOn(let device): _ = try await NodeLauncher.start(directory: directory(device), executable: executable)
        case .setPasscode(let device, let passcode):
            try await client(device).send(.passcode, NodeAPI.Passcode(new: passcode, current: passcodes[device], remove: false))
            passcodes[device] = passcode
        case .removePasscode(let device, let held):
            guard let current = passcodes[device] else { throw ExpectationFailure("\(device) has no passcode to remove") }
            do {
                try await client(device).send(.passcode, NodeAPI.Passcode(new: nil, current: current, remove: true))
            } catch let error as DeviceError where held && error.code == .securityDelay {
                return
            }
            if held { throw ExpectationFailure("expected the Security Delay to hold the removal; the passcode went") }
            passcodes[device] = nil
        case .security(let device, let protection, let away):
            try await client(device).send(.security, NodeAPI.Security(stolenDeviceProtection: protection, away: away))
        case .biometry(let device, let change):
            let action: NodeAPI.BiometryAction =
                switch change {
                case .enroll: .enroll
                case .reenroll: .change
                case .remove: .remove
                }
            try await client(device).send(.biometry, NodeAPI.Biometry(action: action))
        case .install(let device, let bundleID): try await client(device).send(.install, app(bundleID))
        case .uninstall(let device, let bundleID): try await client(device).send(.uninstall, NodeAPI.Uninstall(bundleID: bundleID))
        case .reinstall(let device, let bundleID):
            // Deleting an app deletes its extensions; the App Store puts both back.
            let apps = try await client(device).apps()
            let installed = apps.first { $0.bundleID == bundleID } ?? app(bundleID)
            try await client(device).send(.uninstall, NodeAPI.Uninstall(bundleID: bundleID))
            for app in [installed] + apps.filter({ $0.containingApp == bundleID }) { try await client(device).send(.install, app) }
        case .transferTeam(let device, let bundleID, let team):
            let installed = try await client(device).apps().first { $0.bundleID == bundleID } ?? app(bundleID)
            try await client(device).send(.install, installed.transferred(to: team))
        case .add(let item, let value, let accessible, let accessControl, let expected):
            let new = NewItem(
                item.itemClass, attributes: item.attributes, data: Data(value.utf8), accessGroup: item.group, protection: accessible,
                accessControl: accessControl, synchronizable: item.synchronizable == .yes, useDataProtectionKeychain: item.useDataProtectionKeychain)
            try await expectStatus(expected) { let _: NodeAPI.Items = try await self.client(item.device).call(.add, NodeAPI.Add(app: item.app, item: new)) }
        case .addKey(let item, let spec, let accessible, let accessControl, let expected):
            var attributes = item.attributes
            if spec.secureEnclave { attributes[.tokenID] = .string(NeverExported.secureEnclaveToken) }
            let made = attributes
            // An RSA key takes seconds to find: off the cooperative pool.
            let key = try await BlockingPool.shared.run { _ in try SecKey.random(rsa: spec.rsa, bits: spec.bits, attributes: made) }
            var new = key.newItem
            (new.accessGroup, new.protection, new.accessControl) = (item.group, accessible, accessControl)
            (new.synchronizable, new.useDataProtectionKeychain) = (item.synchronizable == .yes, item.useDataProtectionKeychain)
            try await expectStatus(expected) { let _: NodeAPI.Items = try await self.client(item.device).call(.add, NodeAPI.Add(app: item.app, item: new)) }
        case .update(let item, let value, let expected):
            let changes = ItemChanges(data: Data(value.utf8))
            // The user answers an update's prompt as a read's.
            var query = item.query
            query.authentication = item.read(passcode: passcodes[item.device]).authentication
            try await expectStatus(expected) {
                let _: NodeAPI.Changed = try await self.client(item.device).call(.update, NodeAPI.Update(app: item.app, query: query, changes: changes))
            }
        case .delete(let item, let expected):
            try await expectStatus(expected) {
                let _: NodeAPI.Changed = try await self.client(item.device).call(.delete, NodeAPI.Search(app: item.app, query: item.query))
            }
        case .defaults(let device, let bundleID, let group, let set):
            let _: [String: String] = try await client(device).call(.defaults, NodeAPI.Defaults(bundleID: bundleID, set: set, group: group))
        case .writeFile(let device, let bundleID, let group, let path, let text, let protection):
            let _: NodeAPI.FileContents = try await client(device).call(
                .file, NodeAPI.File(bundleID: bundleID, path: path, contents: Data(text.utf8), protection: protection, group: group))
        case .removeFile(let device, let bundleID, let group, let path):
            let _: NodeAPI.FileContents = try await client(device).call(
                .file, NodeAPI.File(bundleID: bundleID, path: path, remove: true, group: group))
        case .sync(let devices):
            // Around twice: what one pushes, the others pull on the next round.
            for _ in 0..<2 {
                for device in devices { let _: SyncReport = try await client(device).call(.syncNow, NodeAPI.SyncNow()) }
            }
        case .backup(let device, let name, let encrypted, let phone):
            // The parser allows plain file names only; the archive goes nowhere else, and an
            // existing file is the node's to refuse, never ours to remove.
            let directory = fleet.root.appendingPathComponent("archives", isDirectory: true)
            let url = directory.appendingPathComponent(name)
            guard url.deletingLastPathComponent().standardizedFileURL.path == directory.standardizedFileURL.path else {
                throw ExpectationFailure("archive '\(name)' would leave the scenario's directory")
            }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let password = encrypted ? String(decoding: ScenarioRunner.archivePassword, as: UTF8.self) : nil
            if phone {
                let _: PhoneBackupWriter.Summary = try await client(device, patient: true).call(
                    .phoneBackup, NodeAPI.PhoneBackup(path: url.path, password: password, rounds: nil))
            } else {
                let _: ArchiveManifest = try await client(device, patient: true).call(.backup, NodeAPI.Backup(path: url.path, password: password))
            }
            archives[name] = (url, encrypted, phone)
        case .restore(let name, let target):
            let archive = archives[name]!
            let dir = directory(target)
            _ = try await NodeLauncher.stop(directory: dir)
            let passcode = passcodes[target]
            let password = archive.encrypted ? ScenarioRunner.archivePassword : nil
            // The scenario's own backup step wrote it: its origin is known.
            let report =
                archive.phone
                ? try PhoneRestore.restore(archive.url, password: password, to: dir, passcode: passcode, acceptingUnauthenticated: true)
                : try DeviceRestore.restore(archive.url, password: password, to: dir, passcode: passcode, acceptingUnauthenticated: true)
            lastReport = Self.lines(report)
            try await powerOnAndUnlock(target)
        case .transfer(let source, let target):
            let dir = directory(target)
            _ = try await NodeLauncher.stop(directory: dir)
            let report: RestoreReport = try await client(source, patient: true).call(.transfer, NodeAPI.Transfer(target: dir.path, passcode: passcodes[target]))
            lastReport = Self.lines(report)
            try await powerOnAndUnlock(target)
        case .wait(let seconds, let devices):
            // A powered-off device has no clock running; it starts again at real time.
            for device in devices {
                do {
                    let _: NodeAPI.ClockState = try await client(device).call(.clock, NodeAPI.Clock(advance: seconds))
                } catch let error as NodeError where error.code == .notRunning {
                    continue
                }
            }
        case .expect(let item, let expectation):
            try await expect(item, expectation)
        case .expectDefaults(let device, let bundleID, let group, let key, let value):
            let all: [String: String] = try await client(device).call(.defaults, NodeAPI.Defaults(bundleID: bundleID, group: group))
            guard all[key] == value else {
                throw ExpectationFailure(
                    "expected UserDefaults \(key) " + (value.map { "= \"\($0)\"" } ?? "absent")
                        + ", found " + (all[key].map { "\"\($0)\"" } ?? "none"))
            }
        case .expectFile(let device, let bundleID, let group, let path, let expectation):
            let found: String
            do {
                let file: NodeAPI.FileContents = try await client(device).call(.file, NodeAPI.File(bundleID: bundleID, path: path, group: group))
                let contents = file.contents ?? Data()
                if case .text(let text) = expectation, contents == Data(text.utf8) { return }
                found = String(data: contents, encoding: .utf8).map { "\"\($0)\"" } ?? "\(contents.count) bytes that are not text"
            } catch let error as DeviceError where error.code == .noSuchFile {
                if case .absent = expectation { return }
                found = "no such file"
            } catch let error as DeviceError where error.code == .protectedDataUnavailable {
                if case .protected = expectation { return }
                found = "protected: \(error.message)"
            }
            let wanted =
                switch expectation {
                case .text(let text): "\"\(text)\""
                case .absent: "no such file"
                case .protected: "a file protected in this lock state"
                }
            throw ExpectationFailure("expected \(wanted), found \(found)")
        case .expectReport(let text):
            guard lastReport.contains(where: { $0.contains(text) }) else {
                throw ExpectationFailure(
                    "expected a report line containing \"\(text)\"; the report says:\n    "
                        + (lastReport.isEmpty ? "(no restore or transfer ran yet)" : lastReport.joined(separator: "\n    ")))
            }
        case .expectSurvival(let device, let bundleID, let secret, let path, let outcome, let status, let reason, let onSimulator):
            let node = client(device, patient: true)
            let matrix =
                onSimulator
                ? try await node.survivalAgainstSimulator(app: bundleID, passcode: passcodes[device]).simulator
                : try await node.survival(app: bundleID, passcode: passcodes[device])
            // `alice` stands for `alice @ SERVICE` when no secret is named exactly that.
            let row = matrix.rows.first { $0.name == secret } ?? matrix.rows.first { $0.name.hasPrefix("\(secret) @ ") }
            guard let cell = row?.cells[path] else {
                let names = matrix.rows.map(\.name)
                throw ExpectationFailure(
                    matrix.notRun[path].map { "\(path.rawValue) was not run: \($0)" }
                        ?? "no secret named \"\(secret)\" in the matrix (it has: \(names.joined(separator: ", ")))")
            }
            let found = "\(cell.outcome.rawValue)" + (cell.status.map { " \($0.name)" } ?? "") + (cell.reason.map { ": \($0)" } ?? "")
            guard cell.outcome == outcome, status == nil || cell.status == status, reason.map({ cell.reason?.contains($0) == true }) ?? true else {
                throw ExpectationFailure(
                    "expected \(outcome.rawValue)" + (status.map { " \($0.name)" } ?? "")
                        + (reason.map { ": …\($0)…" } ?? "") + ", found \(found)")
            }
        }
    }

    private func powerOnAndUnlock(_ device: String) async throws {
        _ = try await NodeLauncher.start(directory: directory(device), executable: executable)
        try await client(device).send(.unlock, NodeAPI.Unlock(passcode: passcodes[device]))
    }

    /// A keychain call whose outcome must be `expected` (success when nil).
    private func expectStatus(_ expected: KeychainStatus?, _ call: () async throws -> Void) async throws {
        do {
            try await call()
        } catch let error as KeychainError {
            guard error.status == expected else {
                throw ExpectationFailure("expected \(expected?.description ?? "success"), got \(error)")
            }
            return
        }
        if let expected { throw ExpectationFailure("expected \(expected), got success") }
    }

    private func expect(_ item: Scenario.ItemRef, _ expectation: Scenario.Expectation) async throws {
        let found: Result<[ItemRecord], KeychainError>
        do {
            let query = item.read(passcode: passcodes[item.device])
            let answer: NodeAPI.Items = try await client(item.device).call(.copy, NodeAPI.Search(app: item.app, query: query))
            found = .success(answer.items)
        } catch let error as KeychainError {
            found = .failure(error)
        }
        let got: String =
            switch found {
            case .success(let items) where item.tag != nil: items.isEmpty ? "no key" : "the key"
            case .success(let items): items.first?.data.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "an item without data"
            case .failure(let error): "\(error)"
            }
        switch (expectation, found) {
        case (.value(let value), .success(let items)) where items.first?.data == Data(value.utf8): return
        case (.present, .success(let items)) where !items.isEmpty: return
        case (.absent, .failure(let error)) where error.status == .itemNotFound: return
        case (.status(let status), .failure(let error)) where error.status == status: return
        case (.value(let value), _): throw ExpectationFailure("expected \"\(value)\", got \(got)")
        case (.present, _): throw ExpectationFailure("expected the item, got \(got)")
        case (.absent, _): throw ExpectationFailure("expected no such item (errSecItemNotFound), got \(got)")
        case (.status(let status), _): throw ExpectationFailure("expected \(status), got \(got)")
        }
    }

    /// A report as lines to look for text in: `restored NAME`, `dropped NAME: REASON`.
    static func lines(_ report: RestoreReport) -> [String] {
        let dropped = report.items.filter { !$0.restored }.count
        return ["restored \(report.restoredCount) of \(report.items.count) keychain items, dropped \(dropped)"]
            + report.items.map { item in
                // An item sealed to the phone that made an iOS backup has no name to give.
                let name =
                    item.name
                    ?? (item.reason == .sealedToSourceDevice ? "(sealed) \(item.itemClass.name) \(item.protection.name)" : item.uuid.uuidString)
                return item.reason.map { "dropped \(name): \($0.sentence)" } ?? "restored \(name)"
            }
    }
}
