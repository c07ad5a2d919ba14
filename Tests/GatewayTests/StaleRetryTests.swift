import Foundation
import Testing
import TestSupport
@testable import Gateway

/// The one safe retry on a stale pooled upstream connection (docs/behaviour.md) holds for every client protocol:
/// the exchange, not the HTTP/1.1 adapter, owns it.
@Suite struct StaleRetryTests {
    enum Transport: String, CaseIterable { case http1, h2c, h2tls }

    static func harness(_ upstream: StaleKeepAliveUpstream, _ pki: TestPKI) throws -> GatewayHarness {
        try GatewayHarness { _ in
            GatewayHarness.config(upstream: "http://127.0.0.1:\(upstream.port)", routes: """
              - name: open
                prefix: /
                upstream: api
                enforcement: off
            """, server: """
              tls:
                listen: ["127.0.0.1:0"]
                certificate: \(pki.cert)
                private_key: \(pki.key)
            """)
        }
    }

    static func request(_ h: GatewayHarness, _ pki: TestPKI, _ transport: Transport, method: String = "GET") throws -> String {
        let tlsPort = h.server.tlsListenAddresses.first?.port ?? 0
        var args = ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "-X", method]
        switch transport {
        case .http1: args += ["--http1.1", "http://127.0.0.1:\(h.port)/x"]
        case .h2c: args += ["--http2-prior-knowledge", "http://127.0.0.1:\(h.port)/x"]
        case .h2tls: args += ["--http2", "--cacert", pki.caCert, "https://127.0.0.1:\(tlsPort)/x"]
        }
        return try Run.command("curl", args, timeout: 30).stdout
    }

    @Test(arguments: Transport.allCases)
    func aSafeRequestOnAStaleConnectionIsRetriedOnce(_ transport: Transport) throws {
        let upstream = try StaleKeepAliveUpstream()
        defer { upstream.stop() }
        let pki = try TestPKI()
        let h = try Self.harness(upstream, pki)
        defer { h.stop() }
        let version = transport == .http1 ? "1.1" : "2"
        #expect(try Self.request(h, pki, transport) == "200 \(version)")
        // The pooled connection is now stale: the upstream closes it when the next request arrives.
        #expect(try Self.request(h, pki, transport) == "200 \(version)", "the stale connection was not retried")
        #expect(upstream.requestHeads == 3, "first request, the one lost on the stale connection, the retry")
        #expect(upstream.connections == 2)
        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains(#"gateway_upstream_errors_total{upstream="api",kind="stale_connection"} 1"#), "\(metrics)")
    }

    @Test(arguments: Transport.allCases)
    func aPostIsNeverRetried(_ transport: Transport) throws {
        let upstream = try StaleKeepAliveUpstream()
        defer { upstream.stop() }
        let pki = try TestPKI()
        let h = try Self.harness(upstream, pki)
        defer { h.stop() }
        let version = transport == .http1 ? "1.1" : "2"
        #expect(try Self.request(h, pki, transport) == "200 \(version)")
        #expect(try Self.request(h, pki, transport, method: "POST") == "502 \(version)")
        #expect(upstream.requestHeads == 2)
    }
}
