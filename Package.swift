// swift-tools-version:6.0
import PackageDescription

/// Release builds of our own modules skip Swift's dynamic exclusivity checks: they were a quarter of the
/// instructions per proxied request (Benchmarks/callgrind.sh), and these modules keep every mutable state
/// confined to one loop thread. Debug builds, and so `swift test`, keep the checks.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "appcheck-gateway",
    products: [
        .executable(name: "appcheck-gateway", targets: ["appcheck-gateway"]),
        // Library products: what Fuzz/ links its libFuzzer targets against (and what other packages may use).
        .library(name: "HTTPWire", targets: ["HTTPWire"]),
        .library(name: "AppCheck", targets: ["AppCheck"]),
        .library(name: "Gateway", targets: ["Gateway"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .target(name: "CSystemShims"),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "EventLoop", dependencies: ["CSystemShims", "COpenSSL"], swiftSettings: hotPath),
        .target(name: "HTTPWire", dependencies: ["CNghttp2"], swiftSettings: hotPath),
        .target(name: "AppCheck", dependencies: ["COpenSSL"], swiftSettings: hotPath),
        .target(name: "Gateway", dependencies: ["EventLoop", "HTTPWire", "AppCheck", "CSystemShims", "COpenSSL", "CSQLite", "Yams"],
                swiftSettings: hotPath),
        .executableTarget(name: "appcheck-gateway", dependencies: [
            "Gateway", "AppCheck",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .target(name: "TestSupport", dependencies: ["Gateway", "EventLoop", "HTTPWire", "AppCheck", "CSystemShims"]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "TestSupport"]),
        .testTarget(name: "HTTPWireTests", dependencies: ["HTTPWire"]),
        .testTarget(name: "AppCheckTests", dependencies: ["AppCheck"]),
        .testTarget(name: "GatewayTests", dependencies: ["Gateway", "TestSupport", "AppCheck", "EventLoop", "HTTPWire"]),
    ],
    swiftLanguageModes: [.v6]
)
