import ArgumentParser
import Backup
import Foundation
import KeychainModel
import KeyferrySystem
import KeyferryThreads
import Node
import NodeControl
import PhoneBackup

struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup archive onto a powered-off device, and report what came back and what was lost.",
        discussion: """
            The target keeps its own hardware UID and passcode (give the passcode with --passcode-file). \
            The backup's apps are installed with their sandboxes. The target's non-synchronizable \
            items are replaced; synchronizable ones merge (a newer copy or deletion on the target \
            wins). On another device, ThisDeviceOnly items are dropped, and from an unencrypted \
            archive no keychain item comes back. An unencrypted backup that nothing authenticates \
            (an iOS backup, another device's archive) is refused unless --accept-unauthenticated \
            says where it comes from. Nothing lands in Keyferry's own groups (com.keyferry.*), and \
            every item is read back before the restore commits. Every item is reported with its \
            reason, and every local item the restore removes is named. The new store is built aside \
            and swapped in only when complete: any failure leaves the target as it was.
            """)

    @Argument(help: "The archive, or an iOS backup folder (a phone's, or one `backup create --format ios` wrote).", completion: .file())
    var file: String
    @Option(help: "The device to restore onto (made with `keyferry device init`; powered off).", completion: .directory)
    var to: String
    @OptionGroup var target: PasscodeInput
    @OptionGroup var password: BackupPassword
    @Flag(
        help: """
            Restore an unencrypted backup that nothing authenticates: an iOS backup, another device's \
            archive, or a format 1 archive claiming to be the target's. Anyone could have written its apps, \
            access groups, defaults and files, and it replaces the target's local items.
            """)
    var acceptUnauthenticated = false
    @OptionGroup var output: ReportOptions

    func run() async throws {
        let archive = URL(fileURLWithPath: file)
        let phoneBackup = try PhoneBackupPresentation.isPhoneBackup(file) ? try PhoneBackupReader(folder: archive) : nil
        let encrypted = try phoneBackup.map(\.isEncrypted) ?? (ArchiveReader(contentsOf: archive).header.mode == .encrypted)
        try password.refuseForUnencrypted(encrypted: encrypted, file)
        if let weak = phoneBackup?.weakPasswordWarning { warn(weak) }
        let passcode = try target.readForTarget(to, verb: "restore")
        let secret = encrypted ? try password.read(required: true) : nil
        let line = ProgressLine()
        // Ctrl-C or SIGTERM stops the restore at its next step; the target stays as it was and
        // the copy being built is removed.
        let interrupted = Locked(false)
        let handler = ProcessControl.onInterrupt { interrupted.withLock { $0 = true } }
        defer { withExtendedLifetime(handler) {} }
        let report: RestoreReport
        var shown = -1
        do {
            let checkpoint: @Sendable () throws -> Void = { if interrupted.withLock({ $0 }) { throw CancellationError() } }
            let progress = { (done: Int, total: Int) throws in
                try checkpoint()
                if done != shown, done == total || done % 500 == 0 {
                    line.show("restoring \(done)/\(total)", last: done == total)
                    shown = done
                }
            }
            if phoneBackup?.isEncrypted == true { line.show("deriving the password's key (\(phoneBackup!.dataProtectionRounds.formatted()) rounds of PBKDF2)") }
            // The restore holds the target throughout: a running node makes it fail, untouched.
            if phoneBackup != nil {
                report = try PhoneRestore.restore(
                    archive, password: secret.map { Data($0.utf8) }, to: URL(fileURLWithPath: to), passcode: passcode,
                    acceptingUnauthenticated: acceptUnauthenticated, checkpoint: checkpoint, progress: progress)
            } else {
                report = try DeviceRestore.restore(
                    archive, password: secret.map { Data($0.utf8) }, to: URL(fileURLWithPath: to), passcode: passcode,
                    acceptingUnauthenticated: acceptUnauthenticated, progress: progress)
            }
        } catch is CancellationError {
            throw Interrupted(cause: CommandFailure("nothing was restored; \(to) is as it was"))
        }
        if output.json {
            try printJSON(encodable: report)
            return
        }
        if Verbosity.current == .verbose { print(report.table(target: to)) } else { say(report.summary(target: to)) }
    }
}

extension RestoreReport {
    /// `restored 3 of 5 keychain items onto ./new (another device, encrypted archive); 3 apps, 1 sandbox file`;
    /// a transfer `moved 3 of 5 keychain items onto ./new (Quick Start, sealed in transit); ...`.
    func headline(target: String, transfer: Bool = false) -> String {
        (transfer ? "moved" : "restored") + " \(restoredCount) of \(items.count) keychain items onto \(target) "
            + (transfer
                ? "(Quick Start, sealed in transit); "
                : "(\(sameDevice ? "the same device" : "another device"), \(mode.rawValue) \(format == .ios ? "iOS backup" : "archive")); ")
            + "\(apps.count) app\(apps.count == 1 ? "" : "s"), \(sandboxFiles) sandbox file\(sandboxFiles == 1 ? "" : "s")"
    }

    /// When the archive was made; warnings when nothing proved it genuine, or when it is older
    /// than the target's own last backup.
    private func authenticityNote(transfer: Bool) -> [String] {
        // A transfer's archive is its own, made a moment ago: when is no news.
        var lines = transfer ? [] : archiveCreated.map { ["  \(format == .ios ? "backup" : "archive") made \($0.formatted(.iso8601))"] } ?? []
        switch authenticity {
        case .checksums:
            lines.append(
                "  not authenticated: nothing proves who wrote this unencrypted archive (another device's, or format 1), only that it is undamaged; its apps and files could have been written by anyone"
            )
        case .keychainItems:
            lines.append("  keychain items authenticated under the password; files carry no MAC in an iOS backup, only their padding was checked")
        case .unauthenticated:
            lines.append("  not authenticated: nothing in an unencrypted iOS backup proves who wrote it; its apps and files could have been written by anyone")
        case .password, .device:
            break
        }
        for (domain, count) in filesNotRestored.sorted(by: { $0.key < $1.key }) {
            lines.append("  not restored: \(count.items(as: "file")) of \(domain.escapingControlCharacters) (only apps' Documents and UserDefaults are)")
        }
        if let newer = newerBackupOnDevice {
            lines.append(
                "  older than this device's last backup (\(newer.formatted(.iso8601))): it brings back its secrets as they were then; if you meant the newest, it may have been replaced"
            )
        }
        return lines
    }

    /// What a restore prints by default, however many items: the headline, then how many
    /// were dropped for each reason.
    func summary(target: String, transfer: Bool = false) -> String {
        var lines = [headline(target: target, transfer: transfer)] + authenticityNote(transfer: transfer)
        let dropped = Dictionary(grouping: items.compactMap(\.reason), by: { $0 }).mapValues(\.count)
        for (reason, count) in dropped.sorted(by: { $0.value > $1.value }) {
            lines.append("  \(transfer ? "left behind" : "dropped") \(count.items): \(reason.sentence(transfer: transfer))")
        }
        lines += localLossLines
        let waiting = items.filter(\.waitingForApp).count
        if waiting > 0 { lines.append("  \(waiting.items) restored for apps not installed yet; seen once one is installed") }
        lines += neverExportedLines(transfer: transfer)
        if !items.isEmpty { lines.append("  (--verbose lists every item, --json too)") }
        return lines.joined(separator: "\n")
    }

    /// The answer to "what will I lose on a new phone": a line per item, dropped ones with why.
    func table(target: String, transfer: Bool = false) -> String {
        var lines = [headline(target: target, transfer: transfer)] + authenticityNote(transfer: transfer)
        // Names come from the backup: never raw control bytes to the terminal.
        let name = { (item: RestoreReport.ItemOutcome) in
            item.name?.escapingControlCharacters ?? (item.reason == .sealedToSourceDevice ? "(attributes sealed)" : "item \(item.uuid.uuidString.prefix(8))")
        }
        // As wide as the longest name, so every column lines up.
        let nameWidth = items.map { name($0).count }.max() ?? 0
        for item in items.sorted(by: { ($0.restored ? 0 : 1, $0.accessGroup) < ($1.restored ? 0 : 1, $1.accessGroup) }) {
            let columns = [
                item.restored ? (transfer ? "moved   " : "restored") : (transfer ? "left    " : "dropped "), name(item).padded(nameWidth),
                item.itemClass.name.padded(16), item.protection.name.padded(30), item.synchronizable ? "sync " : "local",
            ]
            let note =
                item.reason?.sentence(transfer: transfer) ?? (item.waitingForApp ? "no installed app has its group yet; seen once one is installed" : nil)
            lines.append("  " + columns.joined(separator: " ") + (note.map { "  \($0)" } ?? ""))
        }
        lines += neverExportedLines(transfer: transfer)
        return (lines + localLossLines).joined(separator: "\n")
    }

    /// Items the source never lets out, by class and protection.
    private func neverExportedLines(transfer: Bool) -> [String] {
        let heading = transfer ? "not moved" : "not in the \(format == .ios ? "backup" : "archive")"
        return neverExported.sorted(by: { $0.key < $1.key }).map { name, count in
            "  \(heading): \(count) \(name.replacingOccurrences(of: ".", with: " ").escapingControlCharacters) item\(count == 1 ? "" : "s") (never exported)"
        }
    }

    /// What the target's own items lost: the restore replaces what is device-local, so items
    /// added or changed on it since the backup are named.
    private var localLossLines: [String] {
        let named = { (items: [LocalItemLost]) in
            items.map { ($0.name ?? "a \($0.itemClass.name) item").escapingControlCharacters }.sorted().joined(separator: ", ")
        }
        let gone = localItemsLost.filter { $0.reason == .notInArchive }
        let older = localItemsLost.filter { $0.reason == .olderInArchive }
        var lines: [String] = []
        if !gone.isEmpty { lines.append("  removed \(gone.count.items(as: "local item")) not in the archive: \(named(gone))") }
        if !older.isEmpty { lines.append("  back as the archive holds \(older.count == 1 ? "it" : "them"), losing later changes: \(named(older))") }
        return lines
    }
}

extension RestoreReport.Reason {
    /// In Quick Start's words, where nothing is a backup: a device-bound item stays on the phone
    /// it was made on.
    func sentence(transfer: Bool) -> String {
        guard transfer, self == .deviceBound else { return sentence }
        return "device-bound (ThisDeviceOnly): it stays on the device it was made on"
    }
}
