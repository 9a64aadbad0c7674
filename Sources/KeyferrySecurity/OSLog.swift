import Foundation

/// `os_log` and `OSLog` with Apple's signatures, on Linux where the `os` module is absent: a
/// file that imports `os.log` for them takes `import KeyferrySecurity` instead. A message is
/// formatted as the unified log shows it (`%{public}@` and the like take their argument) and
/// kept in the current context's `loggedMessages`, so a test can read what its code logged;
/// outside a context it goes to standard error.
public struct OSLog: Hashable, Sendable {
    public let subsystem: String
    public let category: String

    public init(subsystem: String, category: String) {
        self.subsystem = subsystem
        self.category = category
    }

    public static let `default` = OSLog(subsystem: "", category: "")
    public static let disabled = OSLog(subsystem: "", category: "disabled")
}

public struct OSLogType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let `default` = OSLogType(rawValue: 0x00)
    public static let info = OSLogType(rawValue: 0x01)
    public static let debug = OSLogType(rawValue: 0x02)
    public static let error = OSLogType(rawValue: 0x10)
    public static let fault = OSLogType(rawValue: 0x11)

    var name: String {
        switch self {
        case .info: "info"
        case .debug: "debug"
        case .error: "error"
        case .fault: "fault"
        default: "default"
        }
    }
}

public func os_log(_ message: StaticString, dso: UnsafeRawPointer? = #dsohandle, log: OSLog = .default, type: OSLogType = .default, _ args: CVarArg...) {
    OSLogWriter.write(type, log, message, args)
}

public func os_log(_ type: OSLogType, dso: UnsafeRawPointer = #dsohandle, log: OSLog = .default, _ message: StaticString, _ args: CVarArg...) {
    OSLogWriter.write(type, log, message, args)
}

enum OSLogWriter {
    static func write(_ type: OSLogType, _ log: OSLog, _ message: StaticString, _ args: [CVarArg]) {
        guard log != .disabled else { return }
        let category = log.category.isEmpty ? "" : "[\(log.subsystem):\(log.category)] "
        let line = "\(type.name): \(category)\(format("\(message)", args))"
        if let context = KeyferryContext.current {
            context.log(line)
        } else {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }

    /// Each `%` specifier, with its `{public}` or `{private}` decoration, takes the next
    /// argument as text; `%%` is a percent sign.
    static func format(_ message: String, _ args: [CVarArg]) -> String {
        var out = ""
        var remaining = args[...]
        var characters = message[...]
        while let percent = characters.firstIndex(of: "%") {
            out += characters[..<percent]
            var rest = characters[characters.index(after: percent)...]
            if rest.first == "%" {
                out += "%"
                characters = rest.dropFirst()
                continue
            }
            if rest.first == "{", let close = rest.firstIndex(of: "}") { rest = rest[rest.index(after: close)...] }
            // Flags, width, length modifiers, then the conversion letter.
            let conversion = rest.firstIndex { $0.isLetter && !"hlqLjzt".contains($0) || $0 == "@" } ?? rest.endIndex
            out += remaining.popFirst().map { "\($0)" } ?? ""
            characters = conversion < rest.endIndex ? rest[rest.index(after: conversion)...] : rest[rest.endIndex...]
        }
        return out + characters
    }
}
