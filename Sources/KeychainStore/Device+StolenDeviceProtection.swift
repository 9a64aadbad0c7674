import Foundation
import GRDB
public import KeychainModel

/// Stolen Device Protection: the setting, where the device is, and the Security Delay that
/// holds a passcode or Face ID change (`SecuritySettings`).
extension Device {
    private static let settingName = "stolenDeviceProtection"

    /// The device's Stolen Device Protection; nil where its iOS has none.
    public func securitySettings() throws -> SecuritySettings? {
        try database.unsafeRead { db in try securitySettings(db) }
    }

    func securitySettings(_ db: Database) throws -> SecuritySettings? {
        guard let initial = info.profile.stolenDeviceProtection else { return nil }
        guard let stored = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE name = ?", arguments: [Self.settingName]) else {
            return SecuritySettings(stolenDeviceProtection: initial)
        }
        do {
            return try JSONDecoder().decode(SecuritySettings.self, from: Data(stored.utf8))
        } catch {
            throw DeviceError(.corrupt, "the device's Stolen Device Protection setting does not read: \(error.localizedDescription)")
        }
    }

    private func save(_ settings: SecuritySettings, _ db: Database) throws {
        let value = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        try db.execute(sql: "INSERT OR REPLACE INTO setting (name, value) VALUES (?, ?)", arguments: [Self.settingName, value])
    }

    /// Turns Stolen Device Protection on (away from familiar locations, or always) or off.
    /// Turning it off, or to a weaker choice, waits for the Security Delay when it applies.
    public func setStolenDeviceProtection(_ mode: StolenDeviceProtection) throws {
        guard let current = try securitySettings() else { throw noProtection() }
        let weaker = mode == .off || (current.stolenDeviceProtection == .always && mode == .away)
        if weaker { _ = try passSecurityDelay(.turningProtectionOff) }
        try database.write { db in
            var settings = try securitySettings(db) ?? current
            settings.stolenDeviceProtection = mode
            settings.delaysStarted[.turningProtectionOff] = nil
            try save(settings, db)
        }
    }

    /// Moves the device away from its familiar locations, or back: back home, a delay under
    /// way ends early (Apple: "your device can end the delay early").
    public func setAway(_ away: Bool) throws {
        guard try securitySettings() != nil else { throw noProtection() }
        try database.write { db in
            guard var settings = try securitySettings(db) else { return }
            settings.away = away
            if !away { settings.delaysStarted = [:] }
            try save(settings, db)
        }
    }

    /// Turns the protection off at once, with no delay: for a scratch copy a path runs on,
    /// where the delay would postpone the change, not prevent it.
    package func dropSecurityDelay() throws {
        try database.write { db in
            guard var settings = try securitySettings(db), settings.stolenDeviceProtection != .off else { return }
            settings.stolenDeviceProtection = .off
            settings.delaysStarted = [:]
            try save(settings, db)
        }
    }

    /// Throws while the Security Delay holds `change`, starting it the first time; returns
    /// true when a delay is over or no longer applies (the second Face ID is the simulated
    /// user's: the caller ends it once the change is made), false when none was started.
    func passSecurityDelay(_ change: DelayedChange) throws -> Bool {
        guard info.profile.stolenDeviceProtection != nil else { return false }
        let now = clock.now()
        let (spent, waitUntil) = try database.write { db -> (Bool, Date?) in
            guard var settings = try securitySettings(db) else { return (false, nil) }
            let keybag = try Keybag.Settings.load(db)
            // A delay started when one applied is spent by the change all the same.
            guard settings.delays(passcodeSet: keybag.passcodeSet, biometryEnrolled: keybag.biometryEnrollment != nil) else {
                return (settings.delaysStarted[change] != nil, nil)
            }
            guard let started = settings.delaysStarted[change] else {
                settings.delaysStarted[change] = now
                try save(settings, db)
                return (false, now.addingTimeInterval(StolenDeviceProtection.securityDelay))
            }
            let end = started.addingTimeInterval(StolenDeviceProtection.securityDelay)
            return now >= end ? (true, nil) : (false, end)
        }
        guard let waitUntil else { return spent }
        let minutes = Int((waitUntil.timeIntervalSince(now) / 60).rounded(.up))
        throw DeviceError(
            .securityDelay,
            "Stolen Device Protection holds \(change.summary) for its Security Delay, \(minutes) more minute\(minutes == 1 ? "" : "s") of the device's clock (away from familiar locations, or set to always); ask again then, or come back to a familiar location."
        )
    }

    /// The delay a change waited for is spent once the change is made.
    func endSecurityDelay(_ change: DelayedChange) throws {
        try database.write { db in
            guard var settings = try securitySettings(db), settings.delaysStarted[change] != nil else { return }
            settings.delaysStarted[change] = nil
            try save(settings, db)
        }
    }

    private func noProtection() -> DeviceError {
        DeviceError(
            .invalidArgument,
            "\(info.name) behaves as \(info.profile.rawValue), which has no Stolen Device Protection (iOS 17.3 and later on an iPhone).")
    }
}
