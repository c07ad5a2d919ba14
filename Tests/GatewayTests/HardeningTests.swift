import EventLoop
import Foundation
import Glibc
@testable import Gateway
import HTTPWire
import Testing
import TestSupport

/// Issue 15 (hardening) regressions, over real sockets: `_` header names (#8), the request writer's own
/// CR/LF/NUL refusal (#6), `header_timeout` from accept (#9) and `body_timeout` (#2), on HTTP/1.1 and HTTP/2.
@Suite struct HardeningTests {
    static let routes = """
      - name: open
        prefix: /
        upstream: api
        enforcement: off
        max_body_bytes: 20MiB
    """

    // MARK: #8 header names with `_`

    @Test func underscoreHeaderNamesAreNeverForwardedOverHTTP1OrHTTP2() throws {
        let h = try GatewayHarness { GatewayHarness.config(upstream: $0, routes: Self.routes) }
        defer { h.stop() }
        let r = try RawHTTPClient.roundTrip(port: h.port, """
            GET /h1 HTTP/1.1\r
            Host: a\r
            X_AppCheck_Status: verified\r
            X_Forwarded_For: 10.9.8.7\r
            X-Kept: yes\r
            \r

            """)
        #expect(r.status == 200)
        let seen1 = try #require(h.upstream.receivedHeads.last { $0.hasPrefix("GET /h1 ") })
        #expect(seen1.contains("X-Kept: yes\n"))
        #expect(!seen1.lowercased().contains("x_appcheck_status"), "\(seen1)")
        #expect(!seen1.lowercased().contains("x_forwarded_for"), "\(seen1)")
        #expect(!seen1.contains("10.9.8.7"), "\(seen1)")

        let c = try Run.command("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                                         "--http2-prior-knowledge", "-H", "X_AppCheck_Status: verified",
                                         "-H", "X_Forwarded_For: 10.9.8.7", "-H", "X-Kept: yes",
                                         "http://127.0.0.1:\(h.port)/h2"], timeout: 30)
        #expect(c.stdout == "200 2", "\(c.stdout) \(c.stderr)")
        let seen2 = try #require(h.upstream.receivedHeads.last { $0.hasPrefix("GET /h2 ") })
        #expect(seen2.lowercased().contains("x-kept: yes\n"))
        #expect(!seen2.lowercased().contains("x_appcheck_status"), "\(seen2)")
        #expect(!seen2.lowercased().contains("x_forwarded_for"), "\(seen2)")
        #expect(!seen2.contains("10.9.8.7"), "\(seen2)")
    }
}
