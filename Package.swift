// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Keyferry",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "keyferry", targets: ["keyferry"]),
        // The Swift parser behind `keyferry lint`, apart so that `keyferry` does not carry it.
        .executable(name: "keyferry-lint", targets: ["keyferry-lint"]),
        .library(name: "KeychainStore", targets: ["KeychainStore"]),
        .library(name: "KeychainModel", targets: ["KeychainModel"]),
        .library(name: "KeyferrySecurity", targets: ["KeyferrySecurity"]),
        // Apple's LocalAuthentication names on Linux, for code that imports the framework.
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "KeyferryTesting", targets: ["KeyferryTesting"]),
        // A Swift client of a running node's control API.
        .library(name: "NodeControl", targets: ["NodeControl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        // The two C libraries, each reached from exactly one Swift wrapper module.
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]),
        .systemLibrary(
            name: "CZstd", pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        .target(name: "KeyferryCrypto", dependencies: ["CSodium", "KeyferryThreads"]),
        .target(name: "KeyferryCompression", dependencies: ["CZstd"]),

        // The system's own C library (file locks, signals, processes, the terminal), reached from
        // this one module as libsodium and libzstd are from theirs; CProcess holds the calls
        // Glibc's module leaves out (prctl).
        .systemLibrary(name: "CProcess"),
        .target(
            name: "KeyferrySystem",
            dependencies: [
                "CProcess", "KeyferryThreads", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // Where blocking and CPU-bound work runs (NIO's thread pools beside the cooperative pool,
        // all cores for a map), how long to wait before trying again, and the one lock every
        // module uses (`Locked`).
        .target(name: "KeyferryThreads", dependencies: [.product(name: "NIOPosix", package: "swift-nio")]),

        // Pure values that the device, its clients and its archives share: keychain items,
        // queries, access control and statuses; the device's directory, profile, apps and
        // status; what a restore and a sync pass report; the coded errors. What a product
        // answers with lives here, so the engines behind it (Backup, SyncWire) stay `package`.
        .target(name: "KeychainModel"),

        // What Apple's iOS backups are made of that no library provides, written once, with
        // vectors: binary plists (with a keyed archive's UIDs), the keychain's DER plists, and
        // AES-GCM with an empty IV. Pure values and codecs.
        .target(
            name: "AppleFormats",
            dependencies: [.product(name: "Crypto", package: "swift-crypto"), .product(name: "_CryptoExtras", package: "swift-crypto")]),

        // One device: keybag, lock states, apps and sandboxes, the encrypted item store.
        .target(
            name: "KeychainStore",
            dependencies: [
                "KeychainModel", "KeyferryCrypto", "KeyferrySystem", "KeyferryThreads",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),

        // Backup archives: the sealed, compressed container; what goes in it and back out.
        .target(
            name: "Backup", dependencies: ["KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferryCompression", "KeyferrySystem", "KeyferryThreads"]),

        // A device as a phone's own backup (a Finder or iTunes folder), written and read: what
        // moves between Keyferry and real iPhones, by Backup's restore rules.
        .target(
            name: "PhoneBackup",
            dependencies: [
                "AppleFormats", "Backup", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferrySystem", "KeyferryThreads",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "GRDB", package: "GRDB.swift"),
            ]),

        // What members and relays exchange, knowing no device: replicated item versions,
        // hybrid clocks, the circle's signed history and keys, sealed and signed envelopes.
        .target(name: "SyncWire", dependencies: ["KeychainModel", "KeyferryCrypto"]),

        // Sync: the engine that pushes a device's items to its circle and applies what arrives.
        .target(name: "Sync", dependencies: ["SyncWire", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferryThreads"]),

        // HTTP/1.1 over a Unix socket (how a node's callers reach it), and why a call got no answer.
        .target(
            name: "KeyferryHTTP", dependencies: [.product(name: "NIOCore", package: "swift-nio")]),

        // The untrusted relay between members, without a network: logs of records per circle
        // kept by the keeper's rules, on embedded SQLite or any storage, and a relay in process.
        .target(
            name: "Relay",
            dependencies: ["SyncWire", "KeychainModel", "KeyferryCrypto", "KeyferryThreads", .product(name: "GRDB", package: "GRDB.swift")]),

        // The relay on the network: its HTTP server (Hummingbird, TLS) and the client members
        // push and pull with. Apart from Relay so that what runs a circle in process (a user's
        // tests, the survival matrix) compiles no server and no TLS stack.
        .target(
            name: "RelayHTTP",
            dependencies: [
                "KeyferryCrypto",
                "Relay", "SyncWire", "KeychainModel", "KeyferrySystem", "KeyferryThreads", "KeyferryHTTP",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),

        // The relay's storage on PostgreSQL, which several relays share. Apart from Relay so that
        // members, which only need its client, never link a database driver.
        .target(
            name: "RelayPostgres",
            dependencies: [
                "Relay", "SyncWire", "KeyferryCrypto", "KeychainModel",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // The survival matrix: every path a device's secrets can take, run on scratch copies.
        .target(
            name: "Survival", dependencies: ["KeyferryCrypto", "KeychainModel", "KeychainStore", "KeyferryThreads", "Backup", "Sync", "SyncWire", "Relay"]),

        // The control API a node answers on the socket in its directory: its routes and values,
        // and the client that calls them. It never opens a device.
        .target(
            name: "NodeControl",
            dependencies: [
                "KeychainModel", "KeyferryHTTP", "KeyferrySystem", "KeyferryThreads",
                .product(name: "NIOCore", package: "swift-nio"),
            ]),

        // A powered-on device as a process: the server of the control API, its sync loop, the
        // launchers that start and stop nodes and relays, and what a client reads of a device
        // whose node is down.
        .target(
            name: "Node",
            dependencies: [
                "NodeControl", "KeychainStore", "KeychainModel", "KeyferryCrypto", "KeyferrySystem", "KeyferryThreads", "Backup", "PhoneBackup", "Sync",
                "SyncWire", "Relay", "RelayHTTP", "Survival",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),

        // Devices run side by side: fleet files (YAML) and bringing their nodes up and down.
        .target(
            name: "Fleet",
            dependencies: ["KeychainModel", "KeychainStore", "Node", "NodeControl", "Relay", .product(name: "Yams", package: "Yams")]),

        // Scenario files: what must survive, stated in YAML and checked on real nodes.
        .target(
            name: "Scenario",
            dependencies: [
                .product(name: "Yams", package: "Yams"),
                "KeychainModel", "KeychainStore", "Backup", "PhoneBackup", "Sync", "SyncWire", "Survival", "Node", "NodeControl", "Fleet",
                "KeyferrySecurity", "KeyferryThreads",
            ]),

        // Keychain Services and LocalAuthentication as Apple spells them, on a simulated device
        // (in this process or a running node), so code written for Apple's platforms runs here.
        .target(
            name: "KeyferrySecurity",
            dependencies: [
                "SecConstants", "SecConstantObjects", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferrySystem",
                "KeyferryThreads", "NodeControl",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"), .product(name: "SwiftASN1", package: "swift-asn1"),
            ]),
        // LAContext and its kin under the framework's own module name: `#if
        // canImport(LocalAuthentication)` compiles the prompt paths on Linux as on a phone.
        .target(name: "LocalAuthentication", dependencies: ["KeyferrySecurity"]),
        // Apple's kSec constants as strings, and the same names as objects where app code needs
        // one: sibling modules, so that both stay visible (SecConstantObjects says why).
        .target(name: "SecConstants"),
        .target(name: "SecConstantObjects", dependencies: ["SecConstants"]),

        // For users' own test suites: a simulated device in a temporary directory, its apps,
        // the user's answers, faults, app kills, backups onto a new device, a sync circle.
        .target(
            name: "KeyferryTesting",
            dependencies: ["KeyferrySecurity", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferryThreads", "Backup", "Sync", "Relay"]),

        // Keychain traps found in Swift sources before they run (`keyferry lint`): the rules
        // are KeychainModel's values, the reading of the source is swift-syntax's.
        .target(
            name: "KeychainLint",
            dependencies: [
                "KeychainModel", .product(name: "SwiftSyntax", package: "swift-syntax"), .product(name: "SwiftParser", package: "swift-syntax"),
                .product(name: "SwiftOperators", package: "swift-syntax"),
            ]),
        .executableTarget(name: "keyferry-lint", dependencies: ["KeychainLint", "KeychainModel"]),

        .executableTarget(
            name: "keyferry",
            dependencies: [
                "KeychainStore", "KeychainModel", "Node", "NodeControl", "Fleet", "Backup", "PhoneBackup", "Relay", "RelayHTTP", "RelayPostgres", "Sync",
                "SyncWire",
                "KeyferrySystem",
                "KeyferryThreads", "Survival",
                "Scenario", "KeyferrySecurity", "KeyferryCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // The readers of outside input under libFuzzer (scripts/fuzz); built plainly, it replays
        // inputs, which the tests do with the corpus in Tests/FuzzCorpus.
        .executableTarget(
            name: "keyferry-fuzz",
            dependencies: [
                "Backup", "Fleet", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferrySecurity", "Node", "NodeControl", "AppleFormats",
                "PhoneBackup", "Scenario", "SyncWire",
                .product(name: "Crypto", package: "swift-crypto"),
            ]),

        // The benchmarks (scripts/bench), each against a floor or a peer measured in the same
        // run. A target of this package, so that they reach its modules without making them
        // products, and are built (and cannot rot) with everything else; no product ships them.
        .executableTarget(
            name: "keyferry-bench",
            dependencies: [
                "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferrySecurity", "Backup", "PhoneBackup", "AppleFormats", "SyncWire",
                "Sync", "Relay", "RelayHTTP", "RelayPostgres", "NodeControl", "Node", "Survival", "KeyferrySystem", "KeyferryThreads",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]),

        // Shared test support: a manual clock, seeded randomness, device fixtures, a circle of one.
        .target(
            name: "KeychainTesting",
            dependencies: ["KeychainStore", "KeychainModel", "KeyferryCrypto", "KeyferryThreads", "SyncWire", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Tests/KeychainTesting"),

        .testTarget(name: "KeyferryCryptoTests", dependencies: ["KeyferryCrypto"]),
        .testTarget(name: "KeyferryCompressionTests", dependencies: ["KeyferryCompression"]),
        .testTarget(name: "KeyferrySystemTests", dependencies: ["KeyferrySystem", "KeychainTesting"]),
        .testTarget(name: "KeyferryHTTPTests", dependencies: ["KeyferryHTTP"]),
        // Reproduction/ is a program of its own, compiled optimized by LockedTests.
        .testTarget(name: "KeyferryThreadsTests", dependencies: ["KeyferryThreads", "KeychainTesting"], exclude: ["Reproduction"]),
        .testTarget(name: "KeychainModelTests", dependencies: ["KeychainModel"]),
        .testTarget(name: "KeychainLintTests", dependencies: ["KeychainLint", "KeychainModel"]),
        .testTarget(
            name: "AppleFormatsTests",
            dependencies: ["AppleFormats", .product(name: "Crypto", package: "swift-crypto"), .product(name: "_CryptoExtras", package: "swift-crypto")]),
        .testTarget(
            name: "PhoneBackupTests",
            dependencies: [
                "PhoneBackup", "AppleFormats", "Backup", "KeychainStore", "KeychainModel", "KeychainTesting",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "KeychainStoreTests",
            dependencies: [
                "KeychainStore", "KeychainModel", "KeyferryCrypto", "KeyferryThreads", "KeychainTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "KeyferrySecurityTests",
            dependencies: ["KeyferrySecurity", "KeychainStore", "KeychainModel", "KeychainTesting"]),
        // Written as a user's own test suite would be: only KeyferryTesting, and app code that
        // compiles unchanged for Apple's platforms (Samples/).
        .testTarget(name: "KeyferryTestingTests", dependencies: ["KeychainModel", "KeyferryTesting", "KeyferrySecurity", "LocalAuthentication"]),
        // The seeds' app code that calls UserDefaults.standard, FileManager.default and
        // Data.write, unchanged but for the one file a user's module adds (DeviceFoundation.swift);
        // in Swift 5 mode, as the seeds' code is written.
        .testTarget(
            name: "FoundationOverlayTests", dependencies: ["KeyferryTesting", "KeyferrySecurity"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(
            name: "SyncTests",
            dependencies: ["Sync", "SyncWire", "KeychainModel", "KeychainStore", "KeyferryCrypto", "KeyferryThreads", "KeychainTesting", "Relay"]),
        .testTarget(
            name: "RelayTests",
            dependencies: [
                "Relay", "RelayHTTP", "RelayPostgres", "SyncWire", "KeychainModel", "KeyferryCrypto", "KeychainTesting", "KeyferryThreads",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "FleetTests", dependencies: ["KeychainModel", "KeyferryCrypto", "Fleet", "KeychainStore", "Relay"]),
        .testTarget(name: "SurvivalTests", dependencies: ["KeyferryCrypto", "Survival", "KeychainStore", "KeychainModel", "KeychainTesting"]),
        .testTarget(
            name: "BackupTests", dependencies: ["Backup", "KeyferryCrypto", "KeyferryThreads", "KeychainStore", "KeychainModel", "KeychainTesting"],
            exclude: ["Format1"]),
        // The node's and the relay's routes, in process: the real routers, no socket, no binary.
        .testTarget(
            name: "NodeTests",
            dependencies: [
                "Node", "NodeControl", "Relay", "RelayHTTP", "Sync", "SyncWire", "Backup", "KeychainStore", "KeychainModel", "KeyferryCrypto",
                "KeychainTesting",
                "KeyferryThreads", "KeyferryHTTP",
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // End to end: the built `keyferry` binary against nodes in temporary directories.
        .testTarget(
            name: "KeyferryCLITests",
            dependencies: [
                "keyferry", "keyferry-lint", "Node", "NodeControl", "Relay", "RelayHTTP", "SyncWire", "KeychainModel", "KeychainStore", "KeyferrySecurity",
                "KeyferryCrypto",
                "KeyferrySystem", "KeyferryThreads", "KeychainTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Crypto", package: "swift-crypto"),
            ],
            // Run by the tests with the readers of iOS backups that scripts/ios-readers installs.
            exclude: ["IOSReaders"]),
    ]
)

// What the compiler checks of every module's imports, as Hummingbird does: a file imports each
// module whose members it uses (no member reaches it through another's import), and an import
// is internal unless the file says it is part of its public (or package) face.
for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility"), .enableUpcomingFeature("InternalImportsByDefault")]
}
