// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "appcheck-gateway",
    products: [
        .executable(name: "appcheck-gateway", targets: ["appcheck-gateway"]),
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
        .target(name: "EventLoop", dependencies: ["CSystemShims", "COpenSSL"]),
        .target(name: "HTTPWire", dependencies: ["CNghttp2"]),
        .target(name: "AppCheck", dependencies: ["COpenSSL"]),
        .target(name: "Gateway", dependencies: ["EventLoop", "HTTPWire", "AppCheck", "CSystemShims", "COpenSSL", "CSQLite", "Yams"]),
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
