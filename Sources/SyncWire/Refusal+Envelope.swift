import KeychainModel

extension Refusal {
    /// An envelope's or a key record's refusal, by its kind.
    package init(_ error: EnvelopeError) {
        let reason: Reason =
            switch error {
            case .malformed: .malformed
            case .unsupportedFormat: .unsupportedFormat
            case .forged: .forged
            case .notAMember: .notAMember
            case .cannotDecrypt: .cannotDecrypt
            case .inconsistent: .inconsistent
            }
        self.init(reason, error.description)
    }
}
