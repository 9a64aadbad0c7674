import ArgumentParser
import Foundation
import KeychainModel
import KeychainStore
import Relay

/// Checks of single option values, run while parsing (`@Option(transform:)`), so a mistake is
/// a usage error (exit 64) before any device is touched.
enum Checked {
    static func bundleID(_ text: String) throws -> String {
        guard !text.isEmpty else { throw ValidationError("a bundle ID cannot be empty, e.g. com.example.mail.") }
        do { try AppManifest.validate(bundleID: text) } catch let error as DeviceError { throw ValidationError(error.message) }
        return text
    }

    static func teamID(_ text: String) throws -> String {
        do { try AppManifest.validate(teamID: text) } catch let error as DeviceError { throw ValidationError(error.message) }
        return text
    }

    static func appIDPrefix(_ text: String) throws -> String {
        do { try AppManifest.validate(teamID: text, naming: "App ID prefix") } catch let error as DeviceError { throw ValidationError(error.message) }
        return text
    }

    static func passcode(_ text: String) throws -> String {
        guard !text.isEmpty else { throw ValidationError("a passcode cannot be empty; for a device without one, leave the option out.") }
        return text
    }

    /// A circle's id, as `circle status` prints it.
    static func uuid(_ text: String) throws -> UUID {
        guard let uuid = UUID(uuidString: text.trimmingCharacters(in: .whitespaces)) else {
            throw ValidationError("'\(text)' is not a circle id: a UUID, as `circle status` prints it on a member.")
        }
        return uuid
    }

    static func name(_ text: String) throws -> String {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("a name cannot be empty; leave the option out for the default.") }
        return text
    }

    /// `kSecAttrAccessControl` flags as written (`biometryCurrentSet|or|devicePasscode`): known
    /// flags, Apple's combinator rules, and at least one thing to ask of the user.
    static func accessControl(_ text: String) throws -> String {
        let flags: AccessControlFlags
        do {
            flags = try AccessControl(protection: .whenUnlocked, expression: text).flags
        } catch {
            throw ValidationError(error.message)
        }
        let constraints = AccessControlFlags.constraints.filter { flags.contains($0.flag) }.count
        let asks = constraints > 0 || flags.contains(.privateKeyUsage) || flags.contains(.applicationPassword)
        guard asks else {
            throw ValidationError("'\(text)' asks nothing of the user; name a constraint such as biometryAny, devicePasscode or userPresence.")
        }
        if constraints < 2 && (flags.contains(.or) || flags.contains(.and)) {
            throw ValidationError("'\(text)' has a combinator with fewer than two constraints; join two, e.g. biometryAny|or|devicePasscode, or drop it.")
        }
        return text
    }

    static func port(_ text: String) throws -> Int64 {
        guard let port = Int64(text), (0...65_535).contains(port) else {
            throw ValidationError("a port is a whole number from 0 to 65535, not '\(text)'.")
        }
        return port
    }

    static func internetProtocol(_ text: String) throws -> String {
        guard let code = InternetProtocol.code(for: text) else {
            throw ValidationError(
                "'\(text)' is not one of Apple's kSecAttrProtocol values; use a name such as HTTPS, HTTP, FTP, SSH, IMAPS "
                    + "or its code (htps, http, ftp, ssh, imps).")
        }
        return code
    }

    static func relayAddress(_ text: String) throws -> RelayAddress {
        guard let address = RelayAddress(text) else { throw ValidationError(RelayAddress.problem(with: text)) }
        return address
    }

    /// A span of time: `90s`, `10m`, `1h30m`, `30d`.
    static func duration(_ text: String) throws -> TimeInterval {
        do {
            return try AdvancingClock.seconds(in: text)
        } catch let error as DeviceError {
            throw ValidationError(error.message)
        }
    }

    /// A size in bytes: `500M`, `2G`, `4096` (K, M, G, T are powers of 1,024).
    static func byteSize(_ text: String) throws -> Int {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        let unit = text.last.flatMap { units[Character($0.uppercased())] }
        let digits = unit == nil ? Substring(text) : text.dropLast()
        guard let count = Int(digits), count > 0, case let (bytes, overflow) = count.multipliedReportingOverflow(by: unit ?? 1), !overflow else {
            throw ValidationError("a size is a whole number of bytes from 1, with K, M, G or T for KiB, MiB, GiB or TiB, such as 500M; not '\(text)'.")
        }
        return bytes
    }

    /// A count from 1, such as `--max-circles 500`.
    static func count(_ text: String) throws -> Int {
        guard let count = Int(text), count > 0 else { throw ValidationError("a count is a whole number from 1, such as 500; not '\(text)'.") }
        return count
    }

    /// `--limit`: one, all, or a number from 1.
    /// A persistent reference as `--json` prints it (base64), with or without a `base64:` prefix.
    static func persistentReference(_ text: String) throws -> PersistentReference {
        let encoded = text.hasPrefix("base64:") ? String(text.dropFirst(7)) : text
        guard let data = Data(base64Encoded: encoded) else {
            throw ValidationError("--persistent-ref takes the base64 that --json prints as persistentRef, not '\(text)'.")
        }
        do {
            return try PersistentReference(data: data)
        } catch {
            throw ValidationError("--persistent-ref '\(text)' is not a persistent reference Keyferry made (25 bytes starting kfpr).")
        }
    }

    static func matchLimit(_ text: String) throws -> MatchLimit {
        switch text {
        case "one": return .one
        case "all": return .all
        default:
            guard let n = Int(text), n > 0 else { throw ValidationError("--limit takes one, all or a number of items from 1, not '\(text)'.") }
            return .count(n)
        }
    }
}
