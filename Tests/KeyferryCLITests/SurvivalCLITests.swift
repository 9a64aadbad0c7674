import Foundation
import KeychainTesting
import Testing

/// `keyferry survival`, `transfer` and `device clock` against real nodes.
@Suite("keyferry survival, transfer and device clock", .blocking)
struct SurvivalCLITests {
    static let app = ["--app", "com.example.mail"]

    /// A phone with a synchronizable item, a device-bound one, one bound to the current face,
    /// and a UserDefaults entry.
    static func phone(_ cli: CLI) throws -> String {
        let dir = try cli.poweredDevice("phone", extra: ["--biometry"])
        try cli.ok(["item", "add", dir] + app + ["--account", "synced", "--value", "s", "--sync"])
        try cli.ok(["item", "add", dir] + app + ["--account", "bound", "--value", "b", "--accessible", "afterFirstUnlockThisDeviceOnly"])
        try cli.ok(
            ["item", "add", dir] + app + [
                "--account", "face", "--value", "f", "--accessible", "whenUnlockedThisDeviceOnly",
                "--access-control", "biometryCurrentSet",
            ])
        try cli.ok(["app", "defaults", dir, "--app", "com.example.mail", "--set", "token=t"])
        return dir
    }

    /// The cell of the row named `name` on `path`, from `survival --json`.
    static func cell(_ matrix: [String: Any], _ name: String, _ path: String) -> [String: Any]? {
        let rows = matrix["rows"] as? [[String: Any]] ?? []
        return (rows.first { $0["name"] as? String == name }?["cells"] as? [String: Any])?[path] as? [String: Any]
    }

    @Test("--compare simulator: the false passes of the iOS Simulator, and what it cannot run; --compare takes nothing else")
    func againstTheSimulator() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        try cli.ok(["item", "add", dir] + Self.app + ["--account", "classA", "--value", "a", "--accessible", "whenUnlocked"])
        let listed = try cli.ok(["item", "list", dir, "--json"]).text
        let comparison = try cli.ok(["survival", dir, "--compare", "simulator", "--json"]).object()
        let passes = (comparison["falsePasses"] as? [[String: Any]] ?? []).map { "\($0["secret"] as? String ?? "") \($0["path"] as? String ?? "")" }
        #expect(passes.contains("classA locked-after-grace") && passes.contains("classA before-first-unlock"), "\(passes)")
        #expect(!passes.contains { $0.hasPrefix("synced ") && $0.hasSuffix("icloud-keychain") })
        let simulator = try #require(comparison["simulator"] as? [String: Any])
        #expect((simulator["notRun"] as? [String: String])?["icloud-keychain"] == "the iOS Simulator has no iCloud Keychain")
        let table = try cli.ok(["survival", dir, "--compare", "simulator"]).text
        #expect(table.contains("beside the iOS Simulator") && table.contains("not on the Simulator: iCloud Keychain"), "\(table)")
        #expect(try cli.ok(["item", "list", dir, "--json"]).text == listed, "the device is as it was")
        let other = try cli.run(["survival", dir, "--compare", "iphone"])
        #expect(other.status == 64 && other.stderr.contains("--compare takes simulator"))
    }

    @Test("a running node's matrix: every path, each loss with its reason, the device as it was")
    func runningNode() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        let listed = try cli.ok(["item", "list", dir, "--json"]).text
        let matrix = try cli.ok(["survival", dir, "--json"]).object()
        #expect((matrix["paths"] as? [String])?.count == 12)
        #expect(Self.cell(matrix, "synced", "icloud-keychain")?["outcome"] as? String == "kept")
        #expect(Self.cell(matrix, "bound", "icloud-keychain")?["reason"] as? String == "device-bound (ThisDeviceOnly): it never leaves this device")
        #expect(Self.cell(matrix, "bound", "encrypted-backup-same-device")?["outcome"] as? String == "kept")
        #expect(Self.cell(matrix, "bound", "quick-start")?["outcome"] as? String == "lost")
        let face = try #require(Self.cell(matrix, "face", "biometry-reenrolled"))
        #expect(face["outcome"] as? String == "unreadable")
        #expect(face["status"] as? String == "errSecAuthFailed")
        #expect(face["code"] as? Int == -25293)
        #expect(Self.cell(matrix, "UserDefaults token", "app-reinstalled")?["reason"] as? String == "the sandbox is wiped when the app is deleted")
        #expect(try cli.ok(["item", "list", dir, "--json"]).text == listed)
        #expect(try cli.status(dir)["lockState"] as? String == "unlocked")

        // Piped, the table is plain text; the legend names each reason once.
        let table = try cli.ok(["survival", dir]).text
        #expect(!table.contains("\u{1B}["))
        #expect(table.contains("biometryCurrentSet invalidated by re-enrolment"))
        #expect(table.contains("QuickStart"))
    }

    @Test("a secret whose name carries terminal control is shown escaped, on one row: it cannot clear the screen or forge rows")
    func controlBytesEscaped() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["item", "add", dir, "--app", "com.example.mail", "--account", "evil\u{1B}[2J\rforged\u{202E}row", "--value", "v"])
        let table = try cli.ok(["survival", dir]).text
        #expect(!table.contains("\u{1B}") && !table.contains("\r") && !table.contains("\u{202E}"), "\(table.debugDescription)")
        let row = try #require(table.split(separator: "\n").first { $0.contains("evil") })
        #expect(row.contains("forged") && row.contains("kept"), "the name and its cells on one line: \(row)")
    }

    @Test("a powered-off device: refused without its passcode, and left byte for byte as it was")
    func poweredOff() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        try cli.ok(["node", "stop", dir])
        let before = try Self.bytes(under: dir)
        let refused = try cli.run(["survival", dir])
        #expect(refused.status == 4)
        #expect(refused.stderr.contains("give it with --passcode, or start and unlock its node"))
        let matrix = try cli.ok(["survival", dir, "--passcode", "123456", "--json"]).object()
        #expect(Self.cell(matrix, "synced", "encrypted-backup-new-device")?["outcome"] as? String == "kept")
        let after = try Self.bytes(under: dir)
        #expect(after.keys.sorted() == before.keys.sorted())
        #expect(after.filter { before[$0.key] != $0.value }.keys.sorted() == [])
    }

    @Test("survival --passcode guesses count on the device, node running or stopped: five wrong ones, then the wait", arguments: [true, false])
    func passcodeGuessesCount(running: Bool) throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        if !running { try cli.ok(["node", "stop", dir]) }
        for guess in ["000001", "000002", "000003", "000004", "000005"] {
            let wrong = try cli.run(["survival", dir, "--passcode", guess])
            #expect(wrong.status != 0 && wrong.stderr.contains("the passcode is not correct"), "\(wrong.stderr)")
        }
        #expect(try cli.status(dir)["failedPasscodeAttempts"] as? Int == 5)
        let waiting = try cli.run(["survival", dir, "--passcode", "123456"])
        #expect(waiting.status != 0 && waiting.stderr.contains("no passcode is tried until then"), "\(waiting.stderr)")
        // Moving the device's clock does not shorten the wait.
        if running {
            try cli.ok(["device", "clock", dir, "--advance", "2h"])
            #expect(try cli.run(["device", "unlock", dir, "--passcode", "123456"]).stderr.contains("no passcode is tried until then"))
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/survival-scratch"), "no scratch is left behind")
    }

    @Test("what a matrix cut short left in the device's directory goes when its node starts; none of it ever was in the temporary directory")
    func scratchCleanedAtStart() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone")
        try cli.ok(["survival", dir, "--json"])
        try cli.ok(["node", "stop", dir])
        let stale = URL(fileURLWithPath: dir).appendingPathComponent("survival-scratch/survival-killed")
        try FileManager.default.createDirectory(at: stale, withIntermediateDirectories: true)
        try cli.ok(["node", "start", dir])
        #expect(!FileManager.default.fileExists(atPath: stale.deletingLastPathComponent().path))
    }

    @Test("a locked device, an unknown app and a bad HTML path are clear errors")
    func refusals() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        try cli.ok(["device", "lock", dir, "--now"])
        let locked = try cli.run(["survival", dir])
        #expect(locked.status != 0)
        #expect(locked.stderr.contains("unlock it first"))
        try cli.ok(["device", "unlock", dir, "--passcode", "123456"])
        let unknown = try cli.run(["survival", dir, "--app", "com.example.none"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("com.example.none is not installed"))
        let badHTML = try cli.run(["survival", dir, "--html", cli.path("missing/dir/m.html")])
        // Checked before the matrix runs: the folder is not there.
        #expect(badHTML.status == 5)
        #expect(badHTML.stderr.contains("there is no directory"), "\(badHTML.stderr)")
    }

    @Test("Quick Start moves what may leave, reports what stays, and refuses the device itself")
    func transfer() throws {
        let cli = try CLI()
        let dir = try Self.phone(cli)
        let newPhone = cli.path("new")
        try cli.ok(["device", "init", newPhone, "--passcode", "654321"])
        let itself = try cli.run(["transfer", dir, "--to", dir])
        #expect(itself.status == 64)
        #expect(itself.stderr.contains("itself"))

        let moved = try cli.ok(["transfer", dir, "--to", newPhone, "--passcode", "654321", "--json"]).object()
        let items = try #require(moved["items"] as? [[String: Any]])
        #expect(items.filter { $0["restored"] as? Bool == true }.count == 1)
        #expect(items.filter { $0["reason"] as? String == "deviceBound" }.count == 1)
        // The item behind biometry does not travel at all, onto any device.
        #expect((moved["neverExported"] as? [String: Int])?["genericPassword.accessControl"] == 1)
        try cli.ok(["node", "start", newPhone])
        try cli.ok(["device", "unlock", newPhone, "--passcode", "654321"])
        #expect(try cli.ok(["item", "get", newPhone] + Self.app + ["--account", "synced", "--sync", "yes"]).text == "s")
        #expect(try cli.run(["item", "get", newPhone] + Self.app + ["--account", "bound"]).status == 3)
        // A running target is refused before anything moves.
        let running = try cli.run(["transfer", dir, "--to", newPhone])
        #expect(running.status == 6)
        #expect(running.stderr.contains("stop it first"))
    }

    @Test("advancing a node's clock ends the grace period without waiting")
    func clock() throws {
        let cli = try CLI()
        let dir = try cli.poweredDevice("phone", extra: ["--grace", "60"])
        try cli.ok(["item", "add", dir] + Self.app + ["--account", "a", "--value", "x", "--accessible", "whenUnlocked"])
        try cli.ok(["device", "lock", dir])
        #expect(try cli.ok(["item", "get", dir] + Self.app + ["--account", "a"]).text == "x")
        let advanced = try cli.ok(["device", "clock", dir, "--advance", "2m", "--json"]).object()
        #expect(advanced["advanced"] as? Double == 120)
        let late = try cli.run(["item", "get", dir] + Self.app + ["--account", "a"])
        #expect(late.status == 3)
        #expect(late.stderr.contains("errSecInteractionNotAllowed"))
        let bad = try cli.run(["device", "clock", dir, "--advance", "soon"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("not a span of time"))
        #expect(try cli.ok(["device", "clock", dir, "--json"]).object()["advanced"] as? Double == 120)
    }

    @Test("the HTML page renders in headless Chromium: colored cells, reasons on hover, nothing fetched")
    func htmlInChromium() throws {
        let chromium = try #require(
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(where: FileManager.default.isExecutableFile),
            "headless Chromium is needed (scripts/system-packages --browser installs it)")
        let cli = try CLI()
        let dir = try Self.phone(cli)
        let page = cli.path("matrix.html")
        try cli.ok(["survival", dir, "--html", page])
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!html.contains("http://") && !html.contains("https://"))
        // What the browser made of it, measured by a probe appended to a copy of the page.
        let probe = """
            <script>
            const cells = [...document.querySelectorAll('#matrix td')];
            const color = c => c ? getComputedStyle(c).backgroundColor : null;
            const first = k => cells.find(c => c.classList.contains(k));
            const table = document.getElementById('matrix').getBoundingClientRect();
            document.body.insertAdjacentHTML('beforeend', '<pre id="probe">' + JSON.stringify({
              cells: cells.length, kept: color(first('kept')), lost: color(first('lost')), unreadable: color(first('unreadable')),
              lostTitle: first('lost').title, width: table.width, height: table.height,
              reasons: document.querySelectorAll('#reasons li').length,
              fetched: performance.getEntriesByType('resource').length
            }) + '</pre>');
            </script>
            """
        let probed = cli.path("probed.html")
        try (html + probe).write(toFile: probed, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(cli.path("chromium"))",
            "--virtual-time-budget=5000", "--dump-dom", "file://\(probed)",
        ]
        let out = Pipe()
        defer { out.closeBothEnds() }
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let dom = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let start = try #require(dom.range(of: "<pre id=\"probe\">", options: .backwards))
        let end = try #require(dom.range(of: "</pre>", range: start.upperBound..<dom.endIndex))
        let json = String(dom[start.upperBound..<end.lowerBound]).replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&amp;", with: "&")
        let rendered = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(rendered["cells"] as? Int == 4 * 12)
        let colors = Set([rendered["kept"], rendered["lost"], rendered["unreadable"]].compactMap { $0 as? String })
        #expect(colors.count == 3, "kept, lost and unreadable cells each have a color of their own: \(rendered)")
        #expect((rendered["lostTitle"] as? String)?.contains(":") == true)
        #expect((rendered["width"] as? Double ?? 0) > 300 && (rendered["height"] as? Double ?? 0) > 50)
        #expect((rendered["reasons"] as? Int ?? 0) >= 3)
        #expect(rendered["fetched"] as? Int == 0)
    }

    /// Every file under `dir` with its bytes.
    static func bytes(under dir: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: dir)
        while let name = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = "\(dir)/\(name)"
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[name] = try Data(contentsOf: URL(fileURLWithPath: path))
            }
        }
        return files
    }
}
