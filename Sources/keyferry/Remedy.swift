import Foundation
import KeychainModel
import NodeControl
import PhoneBackup
import SyncWire

/// What to type next, in the command line's words: the engines state what happened
/// (`CodedError.message`), and this adds the command or option that fixes it, where one does.
enum Remedy {
    /// The error's sentence, with the remedy after it when there is one.
    static func sentence(for error: any CodedError) -> String {
        guard let remedy = remedy(for: error) else { return error.message }
        let fact = error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message
        return "\(fact); \(remedy)."
    }

    static func remedy(for error: any CodedError) -> String? {
        switch error {
        case let error as NodeError:
            switch error.code {
            case .notRunning: return error.subject.map { "start it with `keyferry node start \($0)`" }
            case .alreadyRunning: return error.subject.map { "stop it first with `keyferry node stop \($0)`" }
            default: return nil
            }
        case let error as DeviceError where error.code == .appNotInstalled:
            return error.subject.map { "install it first with `keyferry app install \($0) --app BUNDLE-ID --team TEAM-ID`" }
        case let error as DeviceError where error.code == .alreadyExists:
            // Only a directory that holds a device is worth powering on.
            guard let directory = error.subject, (try? DeviceLayout(root: URL(fileURLWithPath: directory)).requireDevice()) != nil else { return nil }
            return "`keyferry node start \(directory)` powers it on, or choose a new directory"
        case let error as DeviceError where error.code == .inUse:
            return error.subject.map { "if its node runs, stop it first with `keyferry node stop \($0)`" }
        case let error as DeviceError where error.code == .notADevice:
            guard let directory = error.subject else { return nil }
            // Only an empty or missing directory is worth making a device of.
            let contents = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return contents.isEmpty ? "create one with `keyferry device init \(directory)`" : "give the directory `keyferry device init` made"
        case let error as ArchiveError where error.code == .passwordRequired:
            return "give its password with --password-file F, --password-stdin or KEYFERRY_BACKUP_PASSWORD"
        case let error as ArchiveError where error.code == .unauthenticated:
            return "restore it with --accept-unauthenticated if you know where it comes from"
        case let error as PhoneBackupError where error.code == .unauthenticated:
            return "restore it with --accept-unauthenticated if you know where it comes from"
        case let error as PhoneBackupError where error.code == .needsPassword:
            return "give its password with --password-file F, --password-stdin or KEYFERRY_BACKUP_PASSWORD"
        case let error as CircleError:
            switch error.code {
            case .alreadyInCircle: return "`keyferry circle leave` it first"
            case .notInCircle: return "`keyferry circle create` or `keyferry circle join` first"
            case .removed: return "`keyferry circle leave` forgets the circle, so that the device can join again"
            case .relayUnreachable:
                return "run the same command again once the relay answers, or `keyferry circle leave --force` to forget the circle here anyway"
            default: return nil
            }
        case let error as KeychainError where error.reason == .userAuthenticationNeeded:
            return
                "on the command line, answer with --auth match or --auth passcode:CODE, or leave such items out of a search with --auth skip"
        case let error as RelayError where error.code == .tlsFailed && ProcessInfo.processInfo.environment["KEYFERRY_RELAY_CA"] != nil:
            // The node makes the call, and read the variable when it started.
            return "KEYFERRY_RELAY_CA is set here, but a node reads it when it starts: stop the node and start it again with the variable set"
        default:
            return nil
        }
    }
}
