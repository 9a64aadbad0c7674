public import Foundation
import KeychainModel

/// Swapping a whole device directory for one built beside it (what a restore does), so that a
/// crash at any point leaves either the old device or the new one, never a mix.
///
/// The new device is built in `.NAME.restoring-UUID`. Then: a `replace-ready` marker is written
/// into it, `NAME` becomes `.NAME.replaced-UUID`, the new one becomes `NAME`, and the old device
/// and then the marker are removed. Whoever next takes the device (`DeviceHold.take`) first
/// finishes or undoes a swap a crash interrupted, and removes a half-built replacement.
extension Device {
    /// A fresh sibling path to build a replacement for the device in `directory`.
    public static func stagingDirectory(for directory: URL) -> URL {
        sibling(of: directory, "restoring-\(UUID().uuidString)")
    }

    /// Checks `passcode` on the held device itself (a wrong one counts there and its delays
    /// hold, as for every check; on a copy it would be forgotten with it), then copies the
    /// device to `staging` and powers the copy on, unlocked with the class keys that check
    /// opened: one passcode derivation for both. `missingPasscode` is the refusal when the
    /// device has a passcode and none is given.
    package static func unlockedCopy(
        of hold: DeviceHold, at staging: URL, passcode: String?, beforeVerdict: () throws -> Void = {}, missingPasscode: @autoclosure () -> String
    ) throws -> Device {
        let directory = hold.directory
        let original = try powerOn(holding: hold)
        let keys: [ProtectionClass: ClassKeys]
        do {
            defer { original.powerOff() }
            if passcode == nil, try original.passcodeIsSet() { throw KeychainError(.authFailed, missingPasscode()) }
            try original.unlock(passcode: passcode, beforeVerdict: beforeVerdict)
            keys = try original.availableKeys()
        }
        do {
            try FileManager.default.copyItem(at: directory, to: staging)
        } catch {
            throw DeviceError(.io, "cannot copy \(directory.path) aside to \(staging.path): \(error.localizedDescription)")
        }
        let copy = try powerOn(at: staging)
        do {
            try copy.unlock(with: keys)
        } catch {
            copy.powerOff()
            throw error
        }
        return copy
    }

    /// Swaps `staging` (complete, powered off) in for the device in `directory`.
    public static func replace(at directory: URL, with staging: URL) throws {
        let files = FileManager.default
        let replaced = sibling(of: directory, "replaced-\(UUID().uuidString)")
        do {
            guard files.createFile(atPath: staging.appendingPathComponent(readyMarker).path, contents: Data()) else {
                throw DeviceError(.io, "cannot mark \(staging.path) ready")
            }
            try files.moveItem(at: directory, to: replaced)
            try files.moveItem(at: staging, to: directory)
        } catch let error as DeviceError {
            throw error
        } catch {
            recoverReplacement(at: directory)
            throw DeviceError(.io, "could not swap the restored device into \(directory.path): \(error.localizedDescription)")
        }
        // The old device goes before the marker: while the marker stands, the next access
        // finishes the clean-up.
        try? files.removeItem(at: replaced)
        try? files.removeItem(at: directory.appendingPathComponent(readyMarker))
    }

    /// Finishes a swap that reached its point of no return (the new device marked ready and the
    /// old one moved aside), undoes one that did not, and clears what is left of either. Only a
    /// missing device or a ready marker inside it says a swap was cut, so an intact device costs
    /// two lookups, not a listing of its parent.
    static func recoverReplacement(at directory: URL) {
        let files = FileManager.default
        guard
            !files.fileExists(atPath: DeviceLayout(root: directory).info.path)
                || files.fileExists(atPath: directory.appendingPathComponent(readyMarker).path)
        else { return }
        let parent = directory.deletingLastPathComponent()
        let prefix = ".\(directory.lastPathComponent)."
        guard let siblings = try? files.contentsOfDirectory(atPath: parent.path).filter({ $0.hasPrefix(prefix) }) else { return }
        let staged = siblings.filter { $0.hasPrefix(prefix + "restoring-") }.map { parent.appendingPathComponent($0) }
        let replaced = siblings.filter { $0.hasPrefix(prefix + "replaced-") }.map { parent.appendingPathComponent($0) }
        if !files.fileExists(atPath: directory.path) {
            if let ready = staged.first(where: { files.fileExists(atPath: $0.appendingPathComponent(readyMarker).path) }) {
                try? files.moveItem(at: ready, to: directory)
            } else if let old = replaced.first {
                try? files.moveItem(at: old, to: directory)
            }
        }
        guard files.fileExists(atPath: directory.path) else { return }
        try? files.removeItem(at: directory.appendingPathComponent(readyMarker))
        // A restore may be building right now: only what a finished swap leaves is removed here.
        for leftover in replaced where files.fileExists(atPath: leftover.path) { try? files.removeItem(at: leftover) }
    }

    /// Removes replacements that a killed restore left half-built: by whoever takes the device
    /// (no node, no other restore is building one then).
    static func removeAbandonedStaging(for directory: URL) {
        let parent = directory.deletingLastPathComponent()
        let prefix = ".\(directory.lastPathComponent).restoring-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? [] where name.hasPrefix(prefix) {
            try? FileManager.default.removeItem(at: parent.appendingPathComponent(name))
        }
    }

    private static let readyMarker = "replace-ready"

    private static func sibling(of directory: URL, _ suffix: String) -> URL {
        directory.deletingLastPathComponent().appendingPathComponent(".\(directory.lastPathComponent).\(suffix)")
    }
}
