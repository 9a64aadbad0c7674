import Foundation
import NIOSSL
import PostgresNIO
import Relay

/// Where a relay's PostgreSQL database is: `postgres://USER@HOST[:PORT]/DATABASE`, with
/// `?sslmode=require|disable` and `&sslrootcert=FILE` (a PEM file of authorities the database's
/// certificate may chain to, besides the system's). TLS is required whatever the host, loopback
/// included: without it, whoever answers on the address (a process that took a loopback port
/// too) may ask for the password in clear or as MD5, and the client library sends it. Only an
/// operator who names `sslmode=disable` goes without. `prefer` is refused: it is the mode in
/// which a stranger's "no TLS" is believed. The password never travels in the address, since a
/// command line is visible to every user of the machine: it comes from a file or the environment.
package struct PostgresRelayDatabase: Sendable, CustomStringConvertible {
    package var host: String
    package var port: Int
    package var user: String
    package var database: String
    package var sslMode: SSLMode
    /// Extra certificate authorities for the database's certificate.
    package var sslRootCertificate: String?
    package var password: String?

    package enum SSLMode: String, Sendable, CaseIterable {
        case disable, require
    }

    /// The environment variable a password may come from, as for PostgreSQL's own tools.
    package static let passwordVariable = "PGPASSWORD"

    package init(url text: String, password: String?) throws {
        guard let url = URLComponents(string: text), url.scheme == "postgres" || url.scheme == "postgresql" else {
            throw RelayStorageError("'\(text)' is not a postgres://USER@HOST[:PORT]/DATABASE address")
        }
        guard url.password == nil else {
            throw RelayStorageError(
                "the database address carries a password, which every user of this machine can read on a command line; "
                    + "put it in a file (--database-password-file) or in \(Self.passwordVariable)")
        }
        guard let host = url.host, !host.isEmpty else { throw RelayStorageError("'\(text)' names no host") }
        guard let user = url.user, !user.isEmpty else { throw RelayStorageError("'\(text)' names no user (postgres://USER@HOST/DATABASE)") }
        let database = String(url.path.dropFirst())
        guard !database.isEmpty, !database.contains("/") else { throw RelayStorageError("'\(text)' names no database (postgres://USER@HOST/DATABASE)") }
        var sslMode = SSLMode.require
        for item in url.queryItems ?? [] {
            if item.name == "sslmode", item.value == "prefer" {
                throw RelayStorageError(
                    "sslmode=prefer believes whoever answers on the address when it says \"no TLS\", and then sends it the password; "
                        + "TLS is required by default (sslmode=require), and sslmode=disable turns it off by name")
            } else if item.name == "sslmode", let mode = item.value.flatMap(SSLMode.init(rawValue:)) {
                sslMode = mode
            } else if item.name == "sslrootcert", let file = item.value, !file.isEmpty {
                sslRootCertificate = file
            } else {
                throw RelayStorageError(
                    "'\(item.name)=\(item.value ?? "")' in the database address: only sslmode=\(SSLMode.allCases.map(\.rawValue).joined(separator: "|")) "
                        + "and sslrootcert=FILE are understood")
            }
        }
        self.host = host
        self.port = url.port ?? 5432
        self.user = user
        self.database = database
        self.sslMode = sslMode
        self.password = password
    }

    /// The address without any secret, for logs and messages.
    package var description: String { "postgres://\(user)@\(host):\(port)/\(database)?sslmode=\(sslMode.rawValue)" }

    /// How long a connection may take to open, for the pool's connections and the first check alike.
    static let connectTimeout = Duration.seconds(5)

    /// The database's certificate verified against the system's authorities and `sslrootcert`.
    private var tlsConfiguration: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let sslRootCertificate { tls.additionalTrustRoots = [.file(sslRootCertificate)] }
        return tls
    }

    /// For one connection of its own, opened to check the database answers at all.
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS =
            switch sslMode {
            case .disable: .disable
            case .require: .require(try NIOSSLContext(configuration: tlsConfiguration))
            }
        var configuration = PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = TimeAmount.seconds(Int64(Self.connectTimeout.components.seconds))
        return configuration
    }

    var configuration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch sslMode {
            case .disable: .disable
            case .require: .require(tlsConfiguration)
            }
        var configuration = PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = Self.connectTimeout
        return configuration
    }
}
