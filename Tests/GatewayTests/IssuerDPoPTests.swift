import AppCheck
import Foundation
import Gateway
import Testing
import TestSupport

/// SPEC §10 "Key-bound tokens" end to end: exchanges with and without a DPoP proof, `require_dpop`, the minted
/// `cnf.jkt` equal to the proof key's thumbprint, and the bound token then working on the gateway only with proofs
/// from that key.
@Suite struct IssuerDPoPTests {
    static let open = "1:123456789012:web:0a1b2c3d4e5f6a7b"
    static let strict = "1:123456789012:android:0a1b2c3d4e5f6a7c"
    static let secret = "debug-secret-0123456789abcdef"

    static func path(_ appId: String) -> String { "/appcheck/v1/projects/123456789012/apps/\(appId):exchangeDebugToken" }

    final class Rig: @unchecked Sendable {
        let dir: URL
        let gateway: GatewayHarness
        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-dpop-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let keyPath = dir.appendingPathComponent("sign.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
            gateway = try GatewayHarness { upstream in
                GatewayHarness.config(upstream: upstream, routes: """
                  - name: orders
                    prefix: /api/
                    upstream: api
                    enforcement: enforce
                  - name: strict
                    prefix: /strict/
                    upstream: api
                    enforcement: enforce
                    dpop: required
                """, appCheck: """
                  jwks: { url: none }
                """, top: """
                issuer:
                  base_path: /appcheck
                  issuer_url: https://api.example.com/appcheck
                  signing_keys: [\(keyPath)]
                  apps:
                    - app_id: "\(IssuerDPoPTests.open)"
                      debug_secrets: ["\(IssuerDPoPTests.secret)"]
                    - app_id: "\(IssuerDPoPTests.strict)"
                      debug_secrets: ["\(IssuerDPoPTests.secret)"]
                      require_dpop: true
                """)
            }
            try gateway.waitUntilReady()
        }

        func stop() {
            gateway.stop()
            try? FileManager.default.removeItem(at: dir)
        }

        func exchange(_ appId: String, proof: String?) throws -> TestResponse {
            let body = #"{"debug_token":"\#(IssuerDPoPTests.secret)"}"#
            let p = proof.map { "DPoP: \($0)\r\n" } ?? ""
            return try RawHTTPClient.roundTrip(port: gateway.port, "POST \(IssuerDPoPTests.path(appId)) HTTP/1.1\r\nHost: gw\r\n\(p)Content-Length: \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n\(body)",
                                               method: "POST", timeout: 30)
        }

        func call(_ path: String, token: String, proof: String?) throws -> TestResponse {
            let p = proof.map { "DPoP: \($0)\r\n" } ?? ""
            return try RawHTTPClient.roundTrip(port: gateway.port, "GET \(path) HTTP/1.1\r\nHost: gw\r\nX-Firebase-AppCheck: \(token)\r\n\(p)\r\n")
        }
    }

    /// The `cnf.jkt` of a minted token (nil when unbound), read from its payload.
    static func jkt(_ token: String) throws -> String? {
        let payload = try StrictJSON.parse(Base64URL.decode(String(token.split(separator: ".")[1])) ?? [])
        return payload.member("cnf")?.member("jkt")?.stringValue
    }

    static func proof(_ key: DPoPPrivateKey, htm: String = "POST", htu: String) throws -> String {
        try #require(key.proof(htm: htm, htu: htu, iat: Date().timeIntervalSince1970, jti: UUID().uuidString))
    }

    @Test func exchangesWithAndWithoutProofAndTheBoundTokenOnTheGateway() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let key = try #require(DPoPPrivateKey.generate())

        // Without a proof: an unbound token, as before.
        let plain = try rig.exchange(Self.open, proof: nil)
        #expect(plain.status == 200, "\(plain.bodyText)")
        let bearer = try IssuerEndToEndTests.token(plain)
        #expect(try Self.jkt(bearer) == nil)

        // With a proof of the request's own URI: bound to the key.
        let bound = try rig.exchange(Self.open, proof: try Self.proof(key, htu: "http://gw" + Self.path(Self.open)))
        #expect(bound.status == 200, "\(bound.bodyText)")
        let token = try IssuerEndToEndTests.token(bound)
        #expect(try Self.jkt(token) == key.thumbprint)
        // With a proof of the method's URL under issuer_url: bound too.
        let underIssuer = try rig.exchange(Self.open, proof: try Self.proof(key, htu: "https://api.example.com/appcheck/v1/projects/123456789012/apps/\(Self.open):exchangeDebugToken"))
        #expect(underIssuer.status == 200, "\(underIssuer.bodyText)")

        // An invalid proof: 400 INVALID_ARGUMENT, nothing minted, the rule in the log.
        for (proof, rule) in [(try Self.proof(key, htm: "GET", htu: "http://gw" + Self.path(Self.open)), "dpop_htm"),
                              (try Self.proof(key, htu: "http://gw/elsewhere"), "dpop_htu"),
                              ("not-a-proof", "dpop_malformed")] {
            let r = try rig.exchange(Self.open, proof: proof)
            #expect(r.status == 400, "\(rule): \(r.bodyText)")
            #expect(r.bodyText.contains("INVALID_ARGUMENT"))
            #expect(!r.bodyText.contains("token"))
            #expect(rig.gateway.logged("\"rule\":\"\(rule)\""), "\(rule)")
        }

        // The bound token works on the gateway only with proofs from its key.
        let ok = try rig.call("/api/x", token: token, proof: try #require(key.proof(htm: "GET", htu: "http://gw/api/x",
                                                                                    iat: Date().timeIntervalSince1970, jti: "a", accessToken: token)))
        #expect(ok.status == 200, "\(ok.bodyText)")
        let missing = try rig.call("/api/x", token: token, proof: nil)
        #expect(missing.status == 401)
        #expect(AppCheckEndToEndTests.json(missing)["reason"] == "dpop_missing")
        #expect(try rig.call("/api/x", token: bearer, proof: nil).status == 200)
        let unbound = try rig.call("/strict/x", token: bearer, proof: nil)
        #expect(AppCheckEndToEndTests.json(unbound)["reason"] == "dpop_unbound")
        #expect(try rig.call("/strict/x", token: token, proof: try #require(key.proof(htm: "GET", htu: "http://gw/strict/x",
                                                                                      iat: Date().timeIntervalSince1970, jti: "b", accessToken: token))).status == 200)

        let metrics = try RawHTTPClient.roundTrip(port: rig.gateway.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("appcheck_issuer_bound_tokens_total{app_id=\"\(Self.open)\",method=\"exchangeDebugToken\"} 2"), "\(metrics)")
        #expect(metrics.contains("appcheck_dpop_bound_requests_total{route=\"orders\",mode=\"enforce\"} 1"))
    }

    @Test func requireDPoPRefusesExchangesWithoutAProof() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let key = try #require(DPoPPrivateKey.generate(.edDSA))
        let refused = try rig.exchange(Self.strict, proof: nil)
        #expect(refused.status == 400)
        #expect(refused.bodyText.contains("INVALID_ARGUMENT"))
        #expect(rig.gateway.logged("\"rule\":\"dpop_required\""))
        let ok = try rig.exchange(Self.strict, proof: try Self.proof(key, htu: "http://gw" + Self.path(Self.strict)))
        #expect(ok.status == 200, "\(ok.bodyText)")
        #expect(try Self.jkt(try IssuerEndToEndTests.token(ok)) == key.thumbprint)
    }

    @Test func discoveryListsCnf() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let r = try RawHTTPClient.roundTrip(port: rig.gateway.port, "GET /appcheck/123456789012/.well-known/openid-configuration HTTP/1.1\r\nHost: gw\r\n\r\n")
        #expect(r.status == 200, "\(r.bodyText)")
        #expect(r.bodyText.contains("\"provider\",\"risk\",\"cnf\"]"))
    }
}
