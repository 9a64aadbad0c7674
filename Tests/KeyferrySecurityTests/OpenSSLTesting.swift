import Foundation
import Testing

/// A suite that checks Keyferry's keys, signatures and certificates with openssl, the other
/// side, in a directory of its own.
protocol OpenSSLTesting {
    /// Where openssl runs and the files it reads are written.
    var work: URL { get }
}

extension OpenSSLTesting {
    func file(_ name: String, _ data: Data) throws -> String {
        let url = work.appendingPathComponent(name)
        try data.write(to: url)
        return url.path
    }

    @discardableResult
    func openssl(_ arguments: [String]) throws -> Data {
        let (status, data, message) = try run(arguments)
        try #require(status == 0, "openssl \(arguments.joined(separator: " ")): \(message)")
        return data
    }

    /// Whether openssl accepts: for the checks that must fail.
    func opensslAccepts(_ arguments: [String]) throws -> Bool { try run(arguments).status == 0 }

    private func run(_ arguments: [String]) throws -> (status: Int32, output: Data, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = work
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, data, message)
    }
}
