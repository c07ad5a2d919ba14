import Foundation
import Testing
import TestSupport

/// Metrics and access logs as an operator reads them (docs/operations.md).
@Suite struct ObservabilityTests {
    static let routes = """
      - name: open
        prefix: /open/
        upstream: api
        enforcement: off
      - name: watched
        prefix: /watched/
        upstream: api
        enforcement: monitor
      - name: locked
        prefix: /locked/
        upstream: api
        enforcement: enforce
    """

    func harness() throws -> GatewayHarness {
        try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes, appCheck: """
              outdated_client:
                header: User-Agent
                pattern: "^OldApp/"
            """)
        }
    }

    func scrape(_ h: GatewayHarness) throws -> String {
        let r = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
        #expect(r.status == 200)
        #expect(r.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        return r.bodyText
    }

    static func value(_ text: String, _ series: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Int(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test func countsEqualWhatWasSentPerRouteAndOutcome() throws {
        let h = try harness()
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port)
        for _ in 0..<3 { try c.send("GET /open/a HTTP/1.1\r\nHost: a\r\n\r\n"); #expect(try c.readResponse().status == 200) }
        for _ in 0..<2 { try c.send("GET /watched/a HTTP/1.1\r\nHost: a\r\nUser-Agent: OldApp/1.0\r\n\r\n"); #expect(try c.readResponse().status == 200) }
        try c.send("GET /watched/a HTTP/1.1\r\nHost: a\r\nUser-Agent: NewApp/2\r\n\r\n")
        #expect(try c.readResponse().status == 200)
        for _ in 0..<4 { try c.send("GET /locked/a HTTP/1.1\r\nHost: a\r\n\r\n"); #expect(try c.readResponse().status == 401) }
        try c.send("GET /locked/a HTTP/1.1\r\nHost: a\r\nX-Firebase-AppCheck: a\r\nX-Firebase-AppCheck: b\r\n\r\n")
        #expect(try c.readResponse().status == 401)
        try c.send("GET /nowhere HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(try c.readResponse().status == 404)

        let text = try scrape(h)
        #expect(Self.value(text, #"appcheck_requests_total{route="open",mode="off",outcome="skipped"}"#) == 3)
        #expect(Self.value(text, #"appcheck_requests_total{route="watched",mode="monitor",outcome="outdated_client"}"#) == 2)
        #expect(Self.value(text, #"appcheck_requests_total{route="watched",mode="monitor",outcome="unknown_origin"}"#) == 1)
        #expect(Self.value(text, #"appcheck_requests_total{route="locked",mode="enforce",outcome="unknown_origin"}"#) == 4)
        #expect(Self.value(text, #"appcheck_requests_total{route="locked",mode="enforce",outcome="invalid"}"#) == 1)
        #expect(Self.value(text, #"appcheck_rejections_total{route="watched",mode="monitor",reason="missing"}"#) == 3)
        #expect(Self.value(text, #"appcheck_rejections_total{route="locked",mode="enforce",reason="duplicate_header"}"#) == 1)
        #expect(Self.value(text, #"gateway_requests_total{route="open",status="200"}"#) == 3)
        #expect(Self.value(text, #"gateway_requests_total{route="locked",status="401"}"#) == 5)
        #expect(Self.value(text, #"gateway_requests_total{route="",status="404"}"#) == 1)
        #expect(Self.value(text, #"gateway_request_duration_seconds_count{route="open"}"#) == 3)
        #expect(Self.value(text, #"gateway_request_duration_seconds_bucket{route="open",le="+Inf"}"#) == 3)
        #expect(Self.value(text, #"gateway_connections{state="open"}"#) == 1)

        // Monitor routes forward with the reason; the upstream sees it.
        let watched = h.upstream.receivedHeads.filter { $0.hasPrefix("GET /watched/") }
        #expect(watched.count == 3)
        #expect(watched.allSatisfy { $0.contains("X-AppCheck-Status: missing\n") && $0.contains("X-AppCheck-Reason: missing\n") })
    }

    @Test func accessLogLinesAreJSONWithTheSpecFields() throws {
        let h = try harness()
        let c = try RawHTTPClient(port: h.port)
        try c.send("GET /watched/x?secret=1 HTTP/1.1\r\nHost: a\r\nX-Request-Id: log-test-1\r\nCookie: session=hunter2\r\nAuthorization: Bearer hunter3\r\n\r\n")
        #expect(try c.readResponse().status == 200)
        try c.send("GET /locked/x HTTP/1.1\r\nHost: a\r\nX-Request-Id: log-test-2\r\n\r\n")
        #expect(try c.readResponse().status == 401)
        h.stop()
        let lines = h.logLines()
        var byId: [String: [String: Any]] = [:]
        for line in lines {
            let obj = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            #expect(obj["time"] is String && obj["severity"] is String && obj["message"] is String)
            if let id = obj["request_id"] as? String { byId[id] = obj }
        }
        let monitored = try #require(byId["log-test-1"])
        #expect(monitored["route"] as? String == "watched")
        #expect(monitored["method"] as? String == "GET")
        #expect(monitored["path"] as? String == "/watched/x")
        #expect(monitored["status"] as? Int == 200)
        #expect(monitored["outcome"] as? String == "unknown_origin")
        #expect(monitored["reason"] as? String == "missing")
        #expect((monitored["verifications"] as? [String: String])?["app"] == "MISSING")
        #expect(monitored["duration_ms"] is Double || monitored["duration_ms"] is Int)
        #expect(monitored["upstream_ms"] is Double || monitored["upstream_ms"] is Int)
        let locked = try #require(byId["log-test-2"])
        #expect(locked["status"] as? Int == 401)
        #expect(locked["upstream_ms"] is NSNull)
        let all = lines.joined(separator: "\n")
        #expect(!all.contains("hunter2") && !all.contains("hunter3") && !all.contains("secret=1"))
    }

    @Test func healthzAndReadyz() throws {
        let h = try harness()
        defer { h.stop() }
        #expect(try RawHTTPClient.roundTrip(port: h.adminPort, "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n").status == 200)
        #expect(try RawHTTPClient.roundTrip(port: h.adminPort, "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n").status == 404)
        #expect(try RawHTTPClient.roundTrip(port: h.adminPort, "POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").status == 405)
    }
}
