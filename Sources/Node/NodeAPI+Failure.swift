import KeychainModel
import NodeControl

extension NodeAPI.Failure {
    /// What the node answers for `error`. Anything that is not a `CodedError` (a database
    /// error, say) is the device's failure, not the caller's: it must not read as "your request
    /// was malformed". Its own words stay in the node's log (`NodeServer.failure` writes the
    /// cause there), out of the caller's sentence.
    init(_ error: any Error) {
        self.init(
            (error as? any CodedError)
                ?? DeviceError(.internal, "the device failed inside (\(type(of: error))); the node's log has the cause", cause: error))
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
