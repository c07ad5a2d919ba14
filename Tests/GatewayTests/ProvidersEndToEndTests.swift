import AppCheck
import Foundation
import Gateway
import Testing
import TestSupport

/// `routes[].providers` on the request path (docs/behaviour.md, check 7): a token's `provider` claim must be
/// listed; a token without one counts as `unspecified`.
@Suite struct ProvidersEndToEndTests {
    static let appId = "1:123456789012:ios:abc123"
    static let routes = """
      - name: attested
        prefix: /a/
        upstream: api
        enforcement: enforce
        providers: [app_attest, device_check]
      - name: watched
        prefix: /w/
        upstream: api
        enforcement: monitor
        providers: [app_attest]
      - name: firebase
        prefix: /f/
        upstream: api
        enforcement: enforce
        providers: [unspecified]
    """

    func token(_ issuer: LocalIssuer, provider: String?) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims = "{\"iss\":\"https://firebaseappcheck.googleapis.com/123456789012\",\"sub\":\"\(Self.appId)\""
            + ",\"aud\":[\"projects/123456789012\",\"projects/demo-project\"],\"exp\":\(now + 3600),\"iat\":\(now)"
        if let provider { claims += ",\"provider\":\"\(provider)\"" }
        claims += "}"
        return try TokenMinter.mintRaw(headerJSON: "{\"alg\":\"RS256\",\"kid\":\"\(issuer.kid)\",\"typ\":\"JWT\"}",
                                       payloadJSON: claims, key: issuer.key)
    }

    @Test func onlyListedProvidersPass() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try AppCheckEndToEndTests.harness(issuer, routes: Self.routes)
        defer { h.stop() }
        try h.waitUntilReady()
        let attest = try token(issuer, provider: "app_attest")
        let debug = try token(issuer, provider: "debug")
        let plain = try token(issuer, provider: nil)

        #expect(try AppCheckEndToEndTests.get(h, "/a/x", token: attest).status == 200)
        let refused = try AppCheckEndToEndTests.get(h, "/a/x", token: debug)
        #expect(refused.status == 401)
        #expect(AppCheckEndToEndTests.json(refused)["reason"] == "provider_not_allowed")
        let before = h.upstream.receivedHeads.count
        #expect(try AppCheckEndToEndTests.get(h, "/a/x", token: plain).status == 401, "no claim is unspecified")
        #expect(h.upstream.receivedHeads.count == before, "a refused request never reaches the upstream")

        #expect(try AppCheckEndToEndTests.get(h, "/w/x", token: debug).status == 200, "monitor forwards")
        #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Reason: provider_not_allowed\n") == true)

        #expect(try AppCheckEndToEndTests.get(h, "/f/x", token: plain).status == 200)
        #expect(try AppCheckEndToEndTests.get(h, "/f/x", token: attest).status == 401)

        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("reason=\"provider_not_allowed\""))
    }
}
