package import Foundation
import KeyferryCrypto

/// Who may create a circle on a relay: anyone (`open`, the default of a relay on loopback), or
/// whoever presents one of the operator's tokens, given to members out of band. Only creation
/// asks: a circle that exists keeps taking its members' pushes whatever the setting, across
/// restarts, since joining and syncing are checked against its signed membership instead.
package enum RelayAdmission: Sendable, Equatable {
    case open
    /// The BLAKE2b-256 digests of the tokens: the relay compares digests, so neither the time a
    /// comparison takes nor a memory dump gives a token away.
    case tokens(Set<[UInt8]>)

    /// A token shorter than this is refused when the file is read: a token is a password.
    package static let minimumTokenLength = 16

    /// Reads one token per line; blank lines and lines starting with `#` are passed over.
    package init(tokenFile url: URL) throws(TokenFileProblem) {
        let text: String
        do { text = try String(contentsOf: url, encoding: .utf8) } catch {
            throw TokenFileProblem(
                "admission tokens from \(url.path): the file cannot be read as text", missing: !FileManager.default.fileExists(atPath: url.path))
        }
        var digests = Set<[UInt8]>()
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let token = line.trimmingCharacters(in: .whitespaces)
            if token.isEmpty || token.hasPrefix("#") { continue }
            guard token.count >= Self.minimumTokenLength else {
                throw TokenFileProblem(
                    "admission tokens from \(url.path): the token on line \(index + 1) has \(token.count) characters, fewer than \(Self.minimumTokenLength); "
                        + "make tokens as you make passwords, such as with `openssl rand -hex 16`")
            }
            digests.insert(ContentDigest.of(Array(token.utf8)))
        }
        guard !digests.isEmpty else { throw TokenFileProblem("admission tokens from \(url.path): the file holds no token") }
        self = .tokens(digests)
    }

    /// Why a token file was not taken: it cannot be read (`missing`), or what it holds is not
    /// a list of tokens.
    package struct TokenFileProblem: Error, Sendable, CustomStringConvertible {
        package var reason: String
        package var missing = false
        init(_ reason: String, missing: Bool = false) {
            self.reason = reason
            self.missing = missing
        }
        package var description: String { reason }
    }

    /// Whether `token` (the request's `Keyferry-Admission` header) may create a circle.
    func check(_ token: String?, circle: UUID) throws(RelayRefusal) {
        guard case .tokens(let digests) = self else { return }
        guard let token else {
            throw RelayRefusal(
                kind: .unadmitted,
                reason: "this relay creates circles only for holders of an admission token, and the push to create circle \(circle) carries none; "
                    + "ask the relay's operator for one")
        }
        guard digests.contains(ContentDigest.of(Array(token.utf8))) else {
            throw RelayRefusal(kind: .unadmitted, reason: "the admission token given to create circle \(circle) is not one this relay holds")
        }
    }
}
