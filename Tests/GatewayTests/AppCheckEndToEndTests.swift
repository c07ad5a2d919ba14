import AppCheck
import Foundation
@testable import Gateway
@testable import GatewayProcess
import Testing
import TestSupport

/// App Check on the request path (docs/behaviour.md) with a real key set served over HTTP by a local issuer.
@Suite struct AppCheckEndToEndTests {
    static let projectNumber = "123456789012"
    static let projectId = "demo-project"
    static let appId = "1:123456789012:ios:abc123"

    static let routes = """
      - name: enforced
        prefix: /e/
        upstream: api
        enforcement: enforce
      - name: monitored
        prefix: /m/
        upstream: api
        enforcement: monitor
      - name: single-use
        path: /redeem
        upstream: api
        enforcement: enforce
        replay_protection: true
      - name: forwarding
        prefix: /f/
        upstream: api
        enforcement: enforce
        forward_token: true
    """

    /// A gateway whose key set is served by `issuer`.
    static func harness(_ issuer: LocalIssuer, appCheck extra: String = "", routes: String = routes) throws -> GatewayHarness {
        try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: routes, appCheck: """
              project_id: "\(projectId)"
              jwks:
                url: \(issuer.jwksURL)
                unknown_kid_refresh_interval: 30s
            \(extra)
            """)
        }
    }

    static func get(_ h: GatewayHarness, _ path: String, token: String?, extra: String = "") throws -> TestResponse {
        let header = token.map { "X-Firebase-AppCheck: \($0)\r\n" } ?? ""
        return try RawHTTPClient.roundTrip(port: h.port, "GET \(path) HTTP/1.1\r\nHost: api\r\n\(header)\(extra)\r\n")
    }

    static func json(_ r: TestResponse) -> [String: String] {
        (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: String]) ?? [:]
    }

    @Test func validTokenIsForwardedWithAppIdAndWithoutTheToken() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let token = try issuer.mint(appId: Self.appId)
        let r = try Self.get(h, "/e/orders", token: token)
        #expect(r.status == 200)
        let seen = try #require(h.upstream.receivedHeads.last)
        #expect(seen.contains("X-AppCheck-Status: verified\n"))
        #expect(seen.contains("X-AppCheck-App-Id: \(Self.appId)\n"))
        #expect(!seen.lowercased().contains("x-firebase-appcheck"))
        // forward_token keeps it.
        #expect(try Self.get(h, "/f/x", token: token).status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("X-Firebase-AppCheck: \(token)") == true)
    }

    /// Every rejection reason the gateway can see end to end: 401 with the reason, and the upstream untouched.
    @Test func eachRejectionIs401WithItsReasonAndNoUpstreamRequest() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer, appCheck: "  app_ids: [\"\(Self.appId)\"]")
        defer { h.stop() }
        try h.waitUntilReady()
        let now = Int(Date().timeIntervalSince1970)
        let stranger = try RSAPrivateKey.generate(bits: 2048)
        func raw(_ header: String, _ payload: String, key: RSAPrivateKey? = nil) throws -> String {
            try TokenMinter.mintRaw(headerJSON: header, payloadJSON: payload, key: key ?? issuer.key)
        }
        let hdr = "{\"alg\":\"RS256\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JWT\"}"
        let iss = "https://firebaseappcheck.googleapis.com/\(Self.projectNumber)"
        let aud = "[\"projects/\(Self.projectNumber)\",\"projects/\(Self.projectId)\"]"
        func claims(iss i: String = iss, sub: String = AppCheckEndToEndTests.appId, aud a: String = aud, exp: Int? = nil, iat: Int? = nil, extra: String = "") -> String {
            "{\"iss\":\"\(i)\",\"sub\":\"\(sub)\",\"aud\":\(a),\"exp\":\(exp ?? now + 3600),\"iat\":\(iat ?? now)\(extra)}"
        }
        let valid = try issuer.mint(appId: Self.appId)
        let parts = valid.split(separator: ".").map(String.init)
        let cases: [(String, String?, String, String)] = [
            ("missing", nil, "missing", "app_check_token_missing"),
            ("empty", "", "missing", "app_check_token_missing"),
            ("too large", String(repeating: "a", count: 4097), "too_large", "app_check_token_invalid"),
            ("not a JWS", "abc.def", "malformed", "app_check_token_invalid"),
            ("padded", parts[0] + "=." + parts[1] + "." + parts[2], "malformed", "app_check_token_invalid"),
            ("alg none", try raw("{\"alg\":\"none\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JWT\"}", claims()), "unsupported_algorithm", "app_check_token_invalid"),
            ("typ", try raw("{\"alg\":\"RS256\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JOSE\"}", claims()), "wrong_type", "app_check_token_invalid"),
            ("jku", try raw("{\"alg\":\"RS256\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JWT\",\"jku\":\"https://evil\"}", claims()), "malformed", "app_check_token_invalid"),
            ("unknown kid", try raw("{\"alg\":\"RS256\",\"kid\":\"nope\",\"typ\":\"JWT\"}", claims()), "unknown_kid", "app_check_token_invalid"),
            ("bad signature", try raw(hdr, claims(), key: stranger), "bad_signature", "app_check_token_invalid"),
            ("issuer", try raw(hdr, claims(iss: "https://firebaseappcheck.googleapis.com/999")), "wrong_issuer", "app_check_token_invalid"),
            ("audience", try raw(hdr, claims(aud: "[\"projects/999\"]")), "wrong_audience", "app_check_token_invalid"),
            ("app", try raw(hdr, claims(sub: "1:1:android:other")), "app_not_allowed", "app_check_token_invalid"),
            ("expired", try raw(hdr, claims(exp: now - 60, iat: now - 120)), "expired", "app_check_token_invalid"),
            ("future", try raw(hdr, claims(iat: now + 600)), "issued_in_future", "app_check_token_invalid"),
            ("lifetime", try raw(hdr, claims(exp: now + 8 * 86400)), "lifetime_too_long", "app_check_token_invalid"),
            ("duplicate json key", try raw(hdr, "{\"iss\":\"\(iss)\",\"iss\":\"\(iss)\",\"sub\":\"\(Self.appId)\",\"aud\":\(aud),\"exp\":\(now + 60),\"iat\":\(now)}"), "malformed", "app_check_token_invalid"),
        ]
        for (name, token, reason, code) in cases {
            let r = try Self.get(h, "/e/x", token: token)
            #expect(r.status == 401, "\(name)")
            #expect(Self.json(r)["reason"] == reason, "\(name): \(r.bodyText)")
            #expect(Self.json(r)["error"] == code, "\(name)")
            #expect(Self.json(r)["request_id"] == r.header("X-Request-Id"), "\(name)")
        }
        let dup = try Self.get(h, "/e/x", token: valid, extra: "X-Firebase-AppCheck: \(valid)\r\n")
        #expect(dup.status == 401)
        #expect(Self.json(dup)["reason"] == "duplicate_header")
        let inURL = try Self.get(h, "/e/x?X-Firebase-AppCheck=\(valid)", token: nil)
        #expect(inURL.status == 400)
        #expect(Self.json(inURL)["error"] == "app_check_token_in_url")
        #expect(h.upstream.requestCount == 0)
        #expect(!h.logLines().joined().contains(valid), "a token must never be logged")
    }

    @Test func monitorForwardsEverythingWithTheWouldBeReason() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        #expect(try Self.get(h, "/m/x", token: "garbage").status == 200)
        let seen = try #require(h.upstream.receivedHeads.last)
        #expect(seen.contains("X-AppCheck-Status: invalid\n"))
        #expect(seen.contains("X-AppCheck-Reason: malformed\n"))
        #expect(try Self.get(h, "/m/x", token: try issuer.mint(appId: Self.appId)).status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Status: verified\n") == true)
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Reason") == false)
    }

    @Test func corsPreflightBypassesTheTokenCheck() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let r = try RawHTTPClient.roundTrip(port: h.port, "OPTIONS /e/x HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n\r\n")
        #expect(r.status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Status: skipped\n") == true)
        let plain = try RawHTTPClient.roundTrip(port: h.port, "OPTIONS /e/x HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(plain.status == 401)
    }

    @Test func repeatedTokensHitTheCacheButTimeChecksStillRun() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let token = try issuer.mint(appId: Self.appId, ttl: 2)
        let c = try RawHTTPClient(port: h.port)
        for _ in 0..<5 {
            try c.send("GET /e/x HTTP/1.1\r\nHost: a\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
            #expect(try c.readResponse().status == 200)
        }
        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("appcheck_token_cache_total{result=\"hit\"} 4"))
        #expect(metrics.contains("appcheck_token_cache_total{result=\"miss\"} 1"))
        // Past exp + clock_skew (10 s by default) a cached token is refused: use a 0s skew gateway for speed.
        let strict = try Self.harness(issuer, appCheck: "  clock_skew: 0s")
        defer { strict.stop() }
        try strict.waitUntilReady()
        let short = try issuer.mint(appId: Self.appId, ttl: 1)
        #expect(try Self.get(strict, "/e/x", token: short).status == 200)
        // Two seconds later by the gateway's clock (no sleeping: the request path reads an injectable clock).
        strict.server.setWallClock { Date().timeIntervalSince1970 + 2.1 }
        let late = try Self.get(strict, "/e/x", token: short)
        #expect(late.status == 401)
        #expect(Self.json(late)["reason"] == "expired")
    }

    @Test func keyRotationIsPickedUpByTheFirstTokenThatUsesTheNewKey() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let fetchesBefore = issuer.server.fetchCount
        let rotated = try issuer.rotate()
        let r = try Self.get(h, "/e/x", token: rotated)
        #expect(r.status == 200, "\(r.bodyText)")
        #expect(issuer.server.fetchCount == fetchesBefore + 1)
    }

    @Test func unknownKidFloodCausesAtMostTwoFetches() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let before = issuer.server.fetchCount
        let c = try RawHTTPClient(port: h.port)
        for i in 0..<1000 {
            let t = try TokenMinter.mintRaw(headerJSON: "{\"alg\":\"RS256\",\"kid\":\"unknown-\(i)\",\"typ\":\"JWT\"}",
                                            payloadJSON: "{}", key: issuer.key)
            try c.send("GET /e/x HTTP/1.1\r\nHost: a\r\nX-Firebase-AppCheck: \(t)\r\n\r\n")
            let r = try c.readResponse()
            #expect(r.status == 401)
        }
        #expect(issuer.server.fetchCount - before <= 2)
        #expect(h.upstream.requestCount == 0)
    }

    @Test func keySetDownAtStartMeansNotReadyThenReady() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        issuer.server.setAvailable(false)
        let h = try Self.harness(issuer)
        defer { h.stop() }
        let r = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(r.status == 503)
        #expect(r.bodyText.contains("jwks"))
        let enforced = try Self.get(h, "/e/x", token: try issuer.mint(appId: Self.appId))
        #expect(enforced.status == 503)
        #expect(Self.json(enforced)["error"] == "jwks_unavailable")
        #expect(enforced.header("Retry-After") != nil)
        issuer.server.setAvailable(true)
        try h.waitUntilReady(timeout: 10)
        #expect(try Self.get(h, "/e/x", token: try issuer.mint(appId: Self.appId)).status == 200)
    }

    @Test func keySetDownLaterKeepsVerifyingWithTheCachedSet() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        issuer.server.setCacheControl("max-age=1")
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        issuer.server.setAvailable(false)
        usleep(2_500_000)  // past the key set's max-age: refreshes now fail
        #expect(try Self.get(h, "/e/x", token: try issuer.mint(appId: Self.appId)).status == 200)
        let ready = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(ready.status == 200)
    }
}
