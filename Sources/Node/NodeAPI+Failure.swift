import Backup
import KeychainModel
import KeychainStore
import NodeControl
import PhoneBackup
import SyncWire

extension NodeAPI.Failure {
    /// What the node answers for `error`: enough for the client to throw the same error.
    init(_ error: any Error) {
        switch error {
        case let error as KeychainError:
            self.init(domain: .keychain, status: error.status.rawValue, message: error.message)
        case let error as DeviceError:
            self.init(domain: .device, code: error.code.rawValue, message: error.message)
        case let error as Self:
            self = error
        case let error as CircleError:
            self.init(domain: .circle, code: error.code.rawValue, message: error.message)
        case let error as NodeError:
            self.init(domain: .node, code: error.code.rawValue, message: error.message)
        case let error as ArchiveError:
            self.init(domain: .archive, message: error.description, archive: error)
        case let error as PhoneBackupError:
            // The one an iOS backup's writer throws: the folder named is already there.
            self.init(request: error.description)
        case let error as RelayError:
            self.init(domain: .relay, message: error.description, relay: error)
        default:
            // Anything unforeseen (a database error, say) is the device's failure, not the
            // caller's: it must not read as "your request was malformed".
            self.init(domain: .device, code: "internal", message: "\(error)")
        }
    }
}

extension NodeAPI.Found {
    init(_ result: Result<[ItemRecord], any Error>) {
        switch result {
        case .success(let items): self.init(items: items, failure: nil)
        case .failure(let error): self.init(items: nil, failure: NodeAPI.Failure(error))
        }
    }
}
