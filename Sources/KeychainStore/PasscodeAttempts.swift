import Foundation

/// How a device meters passcode attempts (Apple Platform Security, "Passcodes and passwords"):
/// the same wrong passcode entered again does not count again, and from the fifth failed
/// attempt on, the device waits longer after each failure before it tries any passcode; while
/// it waits, even the right passcode is refused with the time left. A value: the keybag keeps
/// it, so neither a reboot nor a killed node resets it. Times are on `Device.attemptClock`,
/// which `device clock --advance` does not move.
struct PasscodeAttempts: Equatable, Sendable {
    var failed = 0
    /// A keyed hash of the last wrong passcode's stretched key (`Keybag.attemptHash`), never
    /// the passcode.
    var lastWrong: [UInt8]?
    var lastFailure: Date?

    /// The wait after `failures` failed attempts: none for one to four, a minute after the
    /// fifth, five after the sixth, fifteen after the seventh and eighth, an hour from the ninth.
    static func delay(after failures: Int) -> TimeInterval {
        switch failures {
        case ..<5: 0
        case 5: 60
        case 6: 5 * 60
        case 7, 8: 15 * 60
        default: 60 * 60
        }
    }

    /// Seconds until a passcode may be tried again; nil when it may be now.
    func retryAfter(at now: Date) -> TimeInterval? {
        guard let lastFailure else { return nil }
        let left = lastFailure.addingTimeInterval(Self.delay(after: failed)).timeIntervalSince(now)
        return left > 0 ? left : nil
    }

    /// Records a wrong passcode; false when it was the last wrong one again, which does not count.
    mutating func recordWrong(_ hash: [UInt8], at now: Date) -> Bool {
        guard hash != lastWrong else { return false }
        failed += 1
        lastWrong = hash
        lastFailure = now
        return true
    }

    /// The sentence for a wrong passcode that was just recorded.
    func wrongPasscodeMessage(counted: Bool, at now: Date) -> String {
        var message = "the passcode is not correct."
        if !counted { message += " It is the wrong passcode tried last time, so it does not count again." }
        message += " Failed attempts: \(failed)."
        if let wait = retryAfter(at: now) { message += " The device is disabled: try again in \(Self.duration(wait))." }
        return message
    }

    /// The sentence for an attempt made while the device waits.
    func disabledMessage(_ wait: TimeInterval) -> String {
        "the device is disabled after \(failed) failed passcode attempts: try again in \(Self.duration(wait)); no passcode is tried until then."
    }

    /// `59 s`, `4 min 30 s`, `1 h`: whole seconds, rounded up.
    static func duration(_ seconds: TimeInterval) -> String {
        let total = Int(seconds.rounded(.up))
        let (hours, minutes, rest) = (total / 3600, total % 3600 / 60, total % 60)
        return [hours > 0 ? "\(hours) h" : nil, minutes > 0 ? "\(minutes) min" : nil, rest > 0 || total == 0 ? "\(rest) s" : nil]
            .compactMap { $0 }.joined(separator: " ")
    }
}
