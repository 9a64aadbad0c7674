// swift-tools-version:6.1
import Foundation
import PackageDescription

// Keyferry's benchmarks, each against a floor measured in the same run: a package of their own,
// so the shipped `keyferry` links neither them nor GRDB directly. Run through `scripts/bench`.

// A package reached by path is known by its directory's name, whatever the clone is called.
let keyferry = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()

let package = Package(
    name: "KeyferryBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        .executableTarget(
            name: "keyferry-bench",
            dependencies: [
                .product(name: "KeychainModel", package: keyferry),
                .product(name: "KeychainStore", package: keyferry),
                .product(name: "KeyferryCrypto", package: keyferry),
                .product(name: "KeyferrySecurity", package: keyferry),
                .product(name: "Backup", package: keyferry),
                .product(name: "PhoneBackup", package: keyferry),
                .product(name: "AppleFormats", package: keyferry),
                .product(name: "SyncWire", package: keyferry),
                .product(name: "Sync", package: keyferry),
                .product(name: "Relay", package: keyferry),
                .product(name: "RelayPostgres", package: keyferry),
                .product(name: "NodeControl", package: keyferry),
                .product(name: "Node", package: keyferry),
                .product(name: "Survival", package: keyferry),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ])
    ]
)
