// swift-tools-version:6.0
import PackageDescription

/// Release builds of our own modules skip Swift's dynamic exclusivity checks: they were a quarter of the
/// instructions per proxied request (Benchmarks/callgrind.sh), and these modules keep every mutable state
/// confined to one loop thread. Debug builds, and so `swift test`, keep the checks.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))]

/// `ProxyCore` (the machines, header rules, counters) is called on every request from `Gateway`, a module above it.
/// Cross-module optimisation serializes public APIs only, and these are `package` APIs: without
/// `-enable-cmo-everything` its machines were called through value witnesses and unspecialised generics
/// (`Benchmarks/callgrind.sh` case A: +4,700 instructions per request, issue 34).
let proxyCorePath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))]

let package = Package(
    name: "appcheck-gateway",
    products: [
        .executable(name: "appcheck-gateway", targets: ["appcheck-gateway"]),
        // Development benchmarks (Benchmarks/issuer-latency.sh); not shipped.
        .executable(name: "appcheck-gateway-bench", targets: ["appcheck-gateway-bench"]),
        // Library products: the codecs, verifiers and the config loader that Fuzz/ links its libFuzzer targets
        // against (see docs/architecture.md).
        .library(name: "HTTPWire", targets: ["HTTPWire"]),
        .library(name: "AppCheck", targets: ["AppCheck"]),
        .library(name: "AppAttest", targets: ["AppAttest"]),
        .library(name: "AppAttestSimulator", targets: ["AppAttestSimulator"]),
        .library(name: "AndroidAttestation", targets: ["AndroidAttestation"]),
        .library(name: "GatewayConfig", targets: ["GatewayConfig"]),
        .library(name: "Gateway", targets: ["Gateway"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // C shims and Debian system libraries.
        .target(name: "CSystemShims"),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        // Rooms, one per line, lowest first; imports point only upwards in this list (docs/architecture.md).
        .target(name: "EventLoop", dependencies: ["CSystemShims", "COpenSSL"], swiftSettings: hotPath),
        .target(name: "HTTPWire", dependencies: ["CNghttp2"], swiftSettings: hotPath),
        .target(name: "AppCheck", dependencies: ["COpenSSL"], swiftSettings: hotPath),
        .target(name: "JSONLog", swiftSettings: hotPath),
        .target(name: "KeySets", dependencies: [
            "EventLoop", "HTTPWire", "AppCheck", "JSONLog", "CSystemShims", "COpenSSL",
        ]),
        .target(name: "AppAttest", dependencies: ["COpenSSL"]),
        .target(name: "AppAttestSimulator", dependencies: ["AppAttest", "COpenSSL"]), // also the simulated Android device
        // Android Key Attestation: the KeyDescription DER reader and the chain rules (issue 37), a sibling of AppAttest.
        .target(name: "AndroidAttestation", dependencies: ["COpenSSL"]),
        .target(name: "ReplayStores", dependencies: ["EventLoop", "JSONLog", "CSystemShims", "CSQLite"],
                swiftSettings: hotPath),
        // The configuration (YAML -> validated Settings) is below everything that reads settings; the issuer and
        // the dashboard are below the proxy, which serves them (docs/architecture.md).
        .target(name: "GatewayConfig", dependencies: [
            "AppCheck", "AppAttest", "JSONLog", "KeySets", "ReplayStores", "COpenSSL", "CLibYAML",
        ], swiftSettings: hotPath),
        .target(name: "Issuer", dependencies: [
            "GatewayConfig", "HTTPWire", "AppCheck", "AppAttest", "AndroidAttestation", "JSONLog", "KeySets", "ReplayStores",
        ], swiftSettings: hotPath),
        .target(name: "Dashboard", dependencies: ["GatewayConfig", "JSONLog", "KeySets", "ReplayStores"],
                swiftSettings: hotPath),
        // The proxy's decisions as values: the exchange and connection state machines, deadlines, header rules, the
        // token cache. No sockets, no loop: tested by feeding events (docs/architecture.md).
        .target(name: "ProxyCore", dependencies: ["EventLoop", "HTTPWire", "AppCheck", "GatewayConfig", "Issuer", "Dashboard", "JSONLog", "ReplayStores"],
                swiftSettings: proxyCorePath),
        .target(name: "Gateway", dependencies: [
            "ProxyCore", "GatewayConfig", "Issuer", "Dashboard", "EventLoop", "HTTPWire", "AppCheck", "JSONLog", "KeySets",
            "ReplayStores", "CSystemShims",
        ], swiftSettings: hotPath),
        // The running process over the proxy: listeners and workers (one loop each), the admin listener, metrics
        // collection, the descriptor and buffer budgets (docs/architecture.md).
        .target(name: "GatewayProcess", dependencies: [
            "Gateway", "ProxyCore", "GatewayConfig", "Issuer", "Dashboard", "EventLoop", "HTTPWire", "AppCheck", "JSONLog",
            "KeySets", "ReplayStores", "CSystemShims",
        ], swiftSettings: hotPath),
        .target(name: "GatewayTools", dependencies: [
            "GatewayConfig", "Issuer", "EventLoop", "HTTPWire", "AppCheck", "AppAttest", "AppAttestSimulator", "JSONLog",
            "COpenSSL",
        ]),
        .executableTarget(name: "appcheck-gateway", dependencies: [
            "GatewayTools", "Gateway", "GatewayProcess", "GatewayConfig", "Issuer", "AppCheck", "KeySets", "JSONLog",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        .executableTarget(name: "appcheck-gateway-bench", dependencies: [
            "GatewayTools", "Gateway", "GatewayProcess", "GatewayConfig", "AppCheck", "AppAttest", "AppAttestSimulator", "JSONLog",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // Tests; helpers shared by test targets live in TestSupport.
        .target(name: "TestSupport", dependencies: [
            "Gateway", "ProxyCore", "GatewayProcess", "GatewayConfig", "GatewayTools", "EventLoop", "HTTPWire", "AppCheck", "JSONLog", "ReplayStores", "AppAttest",
            "AppAttestSimulator",
        ]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "TestSupport"]),
        .testTarget(name: "HTTPWireTests", dependencies: ["HTTPWire", "CNghttp2"]),
        .testTarget(name: "AppCheckTests", dependencies: ["AppCheck", "TestSupport"]),
        .testTarget(name: "AppAttestTests", dependencies: ["AppAttest", "AppAttestSimulator"],
                    resources: [.copy("Vectors")]),
        .testTarget(name: "AndroidAttestationTests", dependencies: ["AndroidAttestation", "AppAttestSimulator"],
                    resources: [.copy("Vectors")]),
        .testTarget(name: "KeySetsTests", dependencies: ["KeySets", "JSONLog", "AppCheck", "GatewayTools", "TestSupport"]),
        .testTarget(name: "ReplayStoresTests", dependencies: ["ReplayStores", "JSONLog", "EventLoop", "TestSupport"]),
        .testTarget(name: "GatewayTests", dependencies: [
            "Gateway", "ProxyCore", "GatewayProcess", "GatewayConfig", "Issuer", "Dashboard", "GatewayTools", "KeySets", "ReplayStores", "JSONLog",
            "TestSupport", "AppCheck", "AppAttest", "AppAttestSimulator", "EventLoop", "HTTPWire", "AndroidAttestation",
        ]),
        .testTarget(name: "GatewayToolsTests", dependencies: ["GatewayTools", "Gateway", "TestSupport", "EventLoop"]),
    ],
    swiftLanguageModes: [.v6]
)
