import Foundation
import Relay
import Testing

@Suite("keyferry relay")
struct RelayCLITests {
    @Test("relay serve announces its address, serves pulls, keeps its data, and stops on SIGTERM")
    func serves() async throws {
        let cli = try CLI()
        let data = cli.path("relay")
        let (process, line) = try cli.start(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0", "--json"])
        let announced = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let url = try #require((announced["url"] as? String).flatMap(URL.init(string:)))
        let circle = UUID()
        let client = RelayClient(url: url)
        #expect(try await client.pull(circle: circle, stream: .envelopes, after: 0).isEmpty)
        let stranger = await #expect(throws: RelayError.self) { try await client.push([[1, 2, 3]], circle: circle, stream: .envelopes, proof: nil) }
        #expect("\(stranger!)".contains("there is no circle"), "\(stranger!)")

        let port = url.port!
        let busy = try cli.run(["relay", "serve", "--data", cli.path("other"), "--listen", "127.0.0.1:\(port)"])
        #expect(busy.status == 1 && busy.stderr.contains("cannot listen on 127.0.0.1:\(port)"), "\(busy.stderr)")

        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(FileManager.default.fileExists(atPath: data + "/relay.sqlite"))
        #expect(try String(contentsOfFile: data + "/relay.log", encoding: .utf8).contains("relay up"))
    }

    @Test("a bad address, a data path that is a file, or a damaged database is refused, and the files are left as they were")
    func badInput() throws {
        let cli = try CLI()
        for listen in ["7700", "127.0.0.1:", "127.0.0.1:70000", ":80", "127.0.0.1:port"] {
            let result = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--listen", listen])
            #expect(result.status == 64 && result.stderr.contains("HOST:PORT"), "\(listen): \(result.stderr)")
        }
        for quota in ["0", "-5M", "12X", "M", "99999999999T"] {
            let result = try cli.run(["relay", "serve", "--data", cli.path("relay"), "--quota", quota])
            #expect(result.status == 64 && result.stderr.contains("such as 500M"), "\(quota): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.path("relay")), "a usage error touches nothing")
        let file = cli.path("not-a-directory")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        let result = try cli.run(["relay", "serve", "--data", file, "--listen", "127.0.0.1:0"])
        #expect(result.status == 1 && result.stderr.contains("is a file"), "\(result.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")

        // A data directory whose database is not one: refused, and the file is left as it was.
        let data = cli.path("damaged")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: data + "/relay.sqlite"))
        let damaged = try cli.run(["relay", "serve", "--data", data, "--listen", "127.0.0.1:0"])
        #expect(damaged.status == 1 && damaged.stderr.contains("cannot keep the relay's database in --data \(data): "), "\(damaged.stderr)")
        #expect(damaged.stderr.contains("not a database"), "\(damaged.stderr)")
        #expect(try String(contentsOfFile: data + "/relay.sqlite", encoding: .utf8) == "keep me")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data) == ["relay.sqlite"])
    }
}
