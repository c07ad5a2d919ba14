import AppCheck
import Foundation
import Gateway
import Testing
import TestSupport

/// SPEC §4.4 on a real gateway in front of a real upstream: tokens bound to a key (`cnf.jkt`) pass only with a fresh
/// DPoP proof from that key for the very request, on HTTP/1.1 (raw sockets) and HTTP/2 (curl, h2c), each rule
/// refused on its own, `jti`s single use on one gateway and across two on one real Redis. Proofs are made here with
/// keys OpenSSL generated (`DPoPPrivateKey`).
@Suite struct DPoPEndToEndTests {
    static let appId = "1:123456789012:ios:abc123"
    static let routes = """
      - name: bound
        prefix: /b/
        upstream: api
        enforcement: enforce
      - name: strict
        prefix: /s/
        upstream: api
        enforcement: enforce
        dpop: required
        dpop_max_age: 30s
      - name: watched
        prefix: /w/
        upstream: api
        enforcement: monitor
      - name: kept
        prefix: /k/
        upstream: api
        enforcement: enforce
        forward_token: true
    """

    static func harness(_ issuer: LocalIssuer, server: String = "", top: String = "") throws -> GatewayHarness {
        try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: routes, server: server, appCheck: """
              project_id: "demo-project"
              jwks:
                url: \(issuer.jwksURL)
            """, top: top)
        }
    }

    /// A token of `issuer` (as Firebase's) bound to `key` when given.
    static func token(_ issuer: LocalIssuer, boundTo key: DPoPPrivateKey?) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims = "{\"iss\":\"https://firebaseappcheck.googleapis.com/123456789012\",\"sub\":\"\(appId)\""
            + ",\"aud\":[\"projects/123456789012\",\"projects/demo-project\"],\"exp\":\(now + 3600),\"iat\":\(now)"
        if let key { claims += ",\"cnf\":{\"jkt\":\"\(key.thumbprint)\"}" }
        return try TokenMinter.mintRaw(headerJSON: "{\"alg\":\"RS256\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JWT\"}",
                                       payloadJSON: claims + "}", key: issuer.key)
    }

    static func proof(_ key: DPoPPrivateKey, htm: String = "GET", htu: String, iat: Double? = nil,
                      jti: String = UUID().uuidString, token: String?) throws -> String {
        try #require(key.proof(htm: htm, htu: htu, iat: iat ?? Date().timeIntervalSince1970, jti: jti, accessToken: token))
    }

    static func get(_ h: GatewayHarness, _ path: String, token: String?, proof: String?, extra: String = "",
                    method: String = "GET") throws -> TestResponse {
        let t = token.map { "X-Firebase-AppCheck: \($0)\r\n" } ?? ""
        let p = proof.map { "DPoP: \($0)\r\n" } ?? ""
        return try RawHTTPClient.roundTrip(port: h.port, "\(method) \(path) HTTP/1.1\r\nHost: api\r\n\(t)\(p)\(extra)\r\n",
                                           method: method)
    }

    static func reason(_ r: TestResponse) -> String? { AppCheckEndToEndTests.json(r)["reason"] }

    @Test func boundTokenNeedsAFreshProofOnEveryRequestAndTheProofIsNotForwarded() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)

        let ok = try Self.get(h, "/b/items?page=2", token: token, proof: try Self.proof(key, htu: "http://api/b/items", token: token))
        #expect(ok.status == 200, "\(ok.bodyText) \(h.logLines().suffix(2))")
        let seen = try #require(h.upstream.receivedHeads.last)
        #expect(seen.contains("X-AppCheck-Status: verified\n"))
        #expect(!seen.lowercased().contains("dpop:"), "the proof is removed before forwarding")

        // The token is now cached as verified: it still needs a proof, and a fresh one passes.
        let bare = try Self.get(h, "/b/items", token: token, proof: nil)
        #expect(bare.status == 401)
        #expect(Self.reason(bare) == "dpop_missing")
        #expect(bare.header("WWW-Authenticate") == "DPoP error=\"invalid_dpop_proof\"")
        #expect(try Self.get(h, "/b/items", token: token, proof: try Self.proof(key, htu: "http://api/b/items", token: token)).status == 200)

        // Stolen: the same token with a proof from the thief's own key.
        let thief = try #require(DPoPPrivateKey.generate())
        let stolen = try Self.get(h, "/b/items", token: token, proof: try Self.proof(thief, htu: "http://api/b/items", token: token))
        #expect(stolen.status == 401)
        #expect(Self.reason(stolen) == "dpop_invalid")
        #expect(h.logged("\"dpop_rule\":\"thumbprint\""))

        // forward_token keeps the proof with the token.
        #expect(try Self.get(h, "/k/x", token: token, proof: try Self.proof(key, htu: "http://api/k/x", token: token)).status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("DPoP: ") == true)

        // Two DPoP fields.
        let p1 = try Self.proof(key, htu: "http://api/b/x", token: token)
        let twice = try Self.get(h, "/b/x", token: token, proof: p1, extra: "DPoP: \(p1)\r\n")
        #expect(twice.status == 401)
        #expect(Self.reason(twice) == "dpop_invalid")
    }

    /// Each §4.4 rule refused on its own: everything else in the proof is right.
    @Test func eachRuleIsRefusedOnItsOwn() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let other = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        let now = Date().timeIntervalSince1970
        let htu = "http://api/b/items"
        let ath = Base64URL.encode(SHA256Digest.hash(Array(token.utf8)))
        func claims(_ extra: String = "") -> String {
            "{\"jti\":\"\(UUID().uuidString)\",\"htm\":\"GET\",\"htu\":\"\(htu)\",\"iat\":\(Int(now)),\"ath\":\"\(ath)\"\(extra)}"
        }
        func raw(_ header: String, _ payload: String, signature: [UInt8] = Array(repeating: 7, count: 64)) -> String {
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "." + Base64URL.encode(signature)
        }
        let jwk = key.publicJWK
        let cases: [(String, String, String)] = [
            ("wrong htm", try Self.proof(key, htm: "POST", htu: htu, token: token), "htm"),
            ("htu with a query", try Self.proof(key, htu: htu + "?page=2", token: token), "htu"),
            ("other host", try Self.proof(key, htu: "http://evil.example/b/items", token: token), "htu"),
            ("https for an http listener", try Self.proof(key, htu: "https://api/b/items", token: token), "htu"),
            ("stale iat", try Self.proof(key, htu: htu, iat: now - 600, token: token), "iat"),
            ("future iat", try Self.proof(key, htu: htu, iat: now + 600, token: token), "iat"),
            ("missing ath", try Self.proof(key, htu: htu, token: nil), "ath"),
            ("wrong ath", try Self.proof(key, htu: htu, token: "another-token"), "ath"),
            ("jwk with d", try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(jwk[2].1)\",\"y\":\"\(jwk[3].1)\",\"d\":\"\(jwk[2].1)\"}}", payloadJSON: claims())), "jwk"),
            ("alg none", raw("{\"typ\":\"dpop+jwt\",\"alg\":\"none\",\"jwk\":\(key.publicJWKJSON)}", claims(), signature: []), "alg"),
            ("alg HS256", raw("{\"typ\":\"dpop+jwt\",\"alg\":\"HS256\",\"jwk\":\(key.publicJWKJSON)}", claims(), signature: Array(repeating: 1, count: 32)), "alg"),
            ("alg RS256", raw("{\"typ\":\"dpop+jwt\",\"alg\":\"RS256\",\"jwk\":\(key.publicJWKJSON)}", claims(), signature: Array(repeating: 1, count: 256)), "alg"),
            ("typ JWT", try #require(key.sign(headerJSON: "{\"typ\":\"JWT\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}", payloadJSON: claims())), "typ"),
            ("thumbprint of another key", try Self.proof(other, htu: htu, token: token), "thumbprint"),
            ("bad signature", raw("{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}", claims()), "signature"),
            ("no jti", try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}", payloadJSON: "{\"htm\":\"GET\",\"htu\":\"\(htu)\",\"iat\":\(Int(now)),\"ath\":\"\(ath)\"}")), "jti"),
            ("not a JWS", "not-a-proof", "malformed"),
        ]
        for (name, proof, rule) in cases {
            let before = h.upstream.receivedHeads.count
            let r = try Self.get(h, "/b/items", token: token, proof: proof)
            #expect(r.status == 401, "\(name)")
            #expect(Self.reason(r) == "dpop_invalid", "\(name)")
            #expect(AppCheckEndToEndTests.json(r)["error"] == "app_check_token_invalid", "\(name)")
            #expect(r.header("WWW-Authenticate") == "DPoP error=\"invalid_dpop_proof\"", "\(name)")
            #expect(h.upstream.receivedHeads.count == before, "\(name): a refused request never reaches the upstream")
            #expect(h.logged("\"dpop_rule\":\"\(rule)\""), "\(name): the log names rule \(rule)")
        }
        // The same request with a right proof passes (the refusals above were each for its one rule).
        #expect(try Self.get(h, "/b/items", token: token, proof: try Self.proof(key, htu: htu, token: token)).status == 200)
    }

    @Test func reusedProofIsRefusedAndRequiredRoutesRefuseBearerTokens() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        let bearer = try Self.token(issuer, boundTo: nil)

        let proof = try Self.proof(key, htu: "http://api/s/x", token: token)
        #expect(try Self.get(h, "/s/x", token: token, proof: proof).status == 200)
        let again = try Self.get(h, "/s/x", token: token, proof: proof)
        #expect(again.status == 401)
        #expect(Self.reason(again) == "dpop_reused")
        #expect(again.header("WWW-Authenticate") == "DPoP error=\"invalid_dpop_proof\"")

        // dpop: required refuses an unbound token, with or without a proof; dpop: optional lets it pass.
        let unbound = try Self.get(h, "/s/x", token: bearer, proof: try Self.proof(key, htu: "http://api/s/x", token: bearer))
        #expect(unbound.status == 401)
        #expect(Self.reason(unbound) == "dpop_unbound")
        #expect(try Self.get(h, "/b/x", token: bearer, proof: nil).status == 200)

        // dpop_max_age: 30s on /s/: a 40-second-old proof is stale there, fresh on /b/ (60 s).
        let old = Date().timeIntervalSince1970 - 40
        let stale = try Self.get(h, "/s/x", token: token, proof: try Self.proof(key, htu: "http://api/s/x", iat: old, token: token))
        #expect(Self.reason(stale) == "dpop_invalid")
        #expect(h.logged("\"dpop_rule\":\"iat\""))
        // On /b/ the same age passes the iat rule; the memory store, started moments ago, then refuses a proof made
        // before it began (it cannot know whether it consumed it before a restart): reused, not invalid.
        let older = try Self.get(h, "/b/x", token: token, proof: try Self.proof(key, htu: "http://api/b/x", iat: old, token: token))
        #expect(Self.reason(older) == "dpop_reused")

        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("reason=\"dpop_reused\""))
        #expect(metrics.contains("reason=\"dpop_unbound\""))
        #expect(metrics.contains("appcheck_dpop_bound_requests_total{route=\"strict\",mode=\"enforce\"} 1"), "\(metrics)")
    }

    @Test func monitorRouteForwardsWithStatusAndReason() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        #expect(try Self.get(h, "/w/x", token: token, proof: nil).status == 200)
        let seen = try #require(h.upstream.receivedHeads.last)
        #expect(seen.contains("X-AppCheck-Status: invalid\n"))
        #expect(seen.contains("X-AppCheck-Reason: dpop_missing\n"))
        let bad = try Self.proof(key, htm: "POST", htu: "http://api/w/x", token: token)
        #expect(try Self.get(h, "/w/x", token: token, proof: bad).status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Reason: dpop_invalid\n") == true)
        #expect(h.upstream.receivedHeads.last?.lowercased().contains("dpop: ") == false)
        #expect(try Self.get(h, "/w/x", token: token, proof: try Self.proof(key, htu: "http://api/w/x", token: token)).status == 200)
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Status: verified\n") == true)
    }

    /// HTTP/2 (h2c, curl): the same exchange code, `htu` from `:authority`.
    @Test func http2() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer)
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        let url = "http://127.0.0.1:\(h.port)/b/h2?x=1"
        func curl(_ proof: String?) throws -> (status: String, headers: String) {
            var args = ["-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-D", "-", "-w", "%{http_code}",
                        "-H", "X-Firebase-AppCheck: \(token)"]
            if let proof { args += ["-H", "DPoP: \(proof)"] }
            let r = try BoundedCommand.run("/usr/bin/curl", args + [url], timeout: 10)
            return (String(r.stdout.suffix(3)), r.stdout)
        }
        let proof = try Self.proof(key, htu: "http://127.0.0.1:\(h.port)/b/h2", token: token)
        let ok = try curl(proof)
        #expect(ok.status == "200")
        #expect(ok.headers.hasPrefix("HTTP/2 200"))
        #expect(h.upstream.receivedHeads.last?.lowercased().contains("dpop: ") == false)
        let replay = try curl(proof)
        #expect(replay.status == "401")
        #expect(replay.headers.lowercased().contains("www-authenticate: dpop error=\"invalid_dpop_proof\""))
        #expect(try curl(nil).status == "401")
        let otherHost = try curl(try Self.proof(key, htu: "http://localhost:\(h.port)/b/h2", token: token))
        #expect(otherHost.status == "401")
    }

    /// Behind a trusted proxy that terminated TLS, `htu` is `https` (its `X-Forwarded-Proto`); from anyone else the
    /// header is ignored.
    @Test func trustedProxySchemeCounts() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.harness(issuer, server: "  trusted_proxies: [\"127.0.0.1/32\"]")
        defer { h.stop() }
        try h.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        let https = try Self.proof(key, htu: "https://api/b/x", token: token)
        #expect(try Self.get(h, "/b/x", token: token, proof: https, extra: "X-Forwarded-Proto: https\r\n").status == 200)
        let plain = try Self.get(h, "/b/x", token: token, proof: try Self.proof(key, htu: "https://api/b/x", token: token))
        #expect(plain.status == 401, "without the proxy's header the listener's http counts")
        let untrusted = try Self.harness(issuer)
        defer { untrusted.stop() }
        try untrusted.waitUntilReady()
        let forged = try Self.get(untrusted, "/b/x", token: token, proof: try Self.proof(key, htu: "https://api/b/x", token: token),
                                  extra: "X-Forwarded-Proto: https\r\n")
        #expect(forged.status == 401)
    }

    /// Two gateways on one real redis-server: a proof consumed by one is refused by the other.
    @Test func proofReplayedOnAnotherGatewayIsRefused() throws {
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let replay = "replay:\n  store: redis\n  redis_url: \(redis.url)\n  timeout: 1s"
        let a = try Self.harness(issuer, top: replay)
        defer { a.stop() }
        let b = try Self.harness(issuer, top: replay)
        defer { b.stop() }
        try a.waitUntilReady()
        try b.waitUntilReady()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try Self.token(issuer, boundTo: key)
        let proof = try Self.proof(key, htu: "http://api/b/x", token: token)
        #expect(try Self.get(a, "/b/x", token: token, proof: proof).status == 200)
        let replayed = try Self.get(b, "/b/x", token: token, proof: proof)
        #expect(replayed.status == 401)
        #expect(Self.reason(replayed) == "dpop_reused")
        #expect(try Self.get(b, "/b/x", token: token, proof: try Self.proof(key, htu: "http://api/b/x", token: token)).status == 200)
    }
}
