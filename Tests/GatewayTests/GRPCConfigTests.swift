import Foundation
@testable import GatewayConfig
import Testing
import TestSupport

/// `check-config` warns about routes whose path or prefix names a gRPC service on an `http1` upstream (SPEC §6.1):
/// every gRPC call there would be answered 14 UNAVAILABLE.
@Suite struct GRPCConfigTests {
    static let yaml = """
    app_check:
      project_number: "123456789012"
    upstreams:
      api:
        url: http://127.0.0.1:3000
      grpc:
        url: http://127.0.0.1:50051
        protocol: h2
    routes:
      - { name: greeter, prefix: /helloworld.Greeter/, upstream: api }
      - { name: health, path: /grpc.health.v1.Health/Check, upstream: api }
      - { name: served, prefix: /test.Echo/, upstream: grpc }
      - { name: versioned, prefix: /v1.2/, upstream: api }
      - { name: rest, prefix: /, upstream: api }

    """

    static let expected = [
        "gw.yaml:10:30: warning: route 'greeter' prefix /helloworld.Greeter/ looks like a gRPC service, but upstream 'api' has protocol: http1: gRPC calls there are answered 14 UNAVAILABLE (upstream_not_h2); set protocol: h2 on the upstream",
        "gw.yaml:11:27: warning: route 'health' path /grpc.health.v1.Health/Check looks like a gRPC service, but upstream 'api' has protocol: http1: gRPC calls there are answered 14 UNAVAILABLE (upstream_not_h2); set protocol: h2 on the upstream",
    ]

    /// Only the gRPC-looking routes on the `http1` upstream, each at its path or prefix; the same route on an `h2`
    /// upstream and REST-looking paths are silent.
    @Test func grpcLookingRoutesOnHTTP1AreWarnedAbout() {
        let warnings = ConfigWarningTests.warnings(Self.yaml)
        #expect(warnings == Self.expected, "\(warnings)")
        let fixed = Self.yaml.replacingOccurrences(of: "upstream: api }\n  - { name: health", with: "upstream: grpc }\n  - { name: health")
            .replacingOccurrences(of: "Check, upstream: api", with: "Check, upstream: grpc")
        #expect(ConfigWarningTests.warnings(fixed) == [], "\(ConfigWarningTests.warnings(fixed))")
    }

    /// `check-config` prints them (and still exits 0).
    @Test func checkConfigPrintsTheWarning() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("grpc-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("gw.yaml").path
        try Self.yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try Run.command(Run.gatewayBinary, ["check-config", "--config", path])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        for line in Self.expected {
            let printed = line.replacingOccurrences(of: "gw.yaml:", with: path + ":")
            #expect(r.stdout.contains(printed + "\n") || r.stderr.contains(printed + "\n"), "\(r.stdout) \(r.stderr)")
        }
    }
}
