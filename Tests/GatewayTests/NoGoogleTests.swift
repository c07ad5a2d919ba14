import AppCheck
import Foundation
@testable import Gateway
import GatewayTools
import TestSupport
import Testing

/// `app_check.jwks: { url: none }` (docs/issuer.md, "App Check with no Google service at all"): Firebase's key set is
/// never fetched, readiness counts only the key sets in use, Firebase-issued tokens are refused as `wrong_issuer`,
/// `check-config` lists the key sets it trusts, and `verify` names the key set it could not fetch.
@Suite(.serialized) struct NoGoogleTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
    static let secret = "no-google-debug-secret-0123456789"

    final class Dir {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("no-google-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: url) }
        func path(_ name: String) -> String { url.appendingPathComponent(name).path }
        func signingKey() throws -> String {
            let p = path("sign.pem")
            if !FileManager.default.fileExists(atPath: p) {
                try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: p, atomically: true, encoding: .utf8)
            }
            return p
        }
    }

    static func issuerSection(key: String) -> String {
        """
        issuer:
          issuer_url: https://api.example.com/appcheck
          signing_keys: [\(key)]
          state: { store: memory }
          apps:
            - app_id: "\(appId)"
              debug_secrets: ["\(secret)"]
        """
    }

    // MARK: configuration

    @Test func noneWithoutAnyOtherKeySetIsAnErrorAtTheURL() {
        let yaml = """
        app_check:
          project_number: "123456789012"
          jwks:
            url: none
        upstreams:
          api:
            url: http://127.0.0.1:3000
        routes:
          - name: all
            prefix: /
            upstream: api
        """
        #expect(ConfigFixture.messages(yaml) == [
            "4:10: app_check.jwks.url is none but there is no issuer: section and no app_check.trusted_issuers: no key set could ever verify a token",
        ])
    }

    @Test func noneWithAnIssuerOrTrustedIssuersLoadsAndCheckConfigSaysWhatIsTrusted() throws {
        let dir = try Dir()
        let withIssuer = """
        app_check:
          project_number: "123456789012"
          jwks: { url: none }
        upstreams:
          api:
            url: http://127.0.0.1:3000
        routes:
          - name: all
            prefix: /
            upstream: api
        \(Self.issuerSection(key: try dir.signingKey()))
        """
        let settings = try ConfigFixture.load(withIssuer).get()
        #expect(settings.appCheck.jwks.isNone)
        let printed = describeRoutes(settings).split(separator: "\n").map(String.init)
        let block = printed.drop { $0 != "key sets trusted:" }.dropFirst().prefix { $0.hasPrefix("  ") }
        #expect(block.count == 2, "\(printed)")
        #expect(block.first?.contains("not used (app_check.jwks.url: none)") == true)
        #expect(block.last?.contains("iss https://api.example.com/appcheck/123456789012 from signing_keys (1 key, local)") == true)
        #expect(printed.contains("  discovery: /appcheck/123456789012/.well-known/openid-configuration"))

        let trustedOnly = """
        app_check:
          project_number: "123456789012"
          jwks: { url: NONE }
          trusted_issuers:
            - { iss: "https://other.example.com/appcheck/123456789012", jwks_url: "https://other.example.com/appcheck/v1/jwks" }
        upstreams:
          api:
            url: http://127.0.0.1:3000
        routes:
          - name: all
            prefix: /
            upstream: api
        """
        let trusted = try ConfigFixture.load(trustedOnly).get()
        #expect(trusted.appCheck.jwks.url == "none")
        #expect(describeKeySets(trusted).contains { $0.contains("trusted") && $0.contains("from https://other.example.com/appcheck/v1/jwks") })
        // Firebase's line names its iss and URL when it is in use.
        let firebase = try ConfigFixture.load(ConfigFixture.minimal).get()
        #expect(describeKeySets(firebase) == [
            "key sets trusted:",
            "  firebase  iss https://firebaseappcheck.googleapis.com/123456789012 from https://firebaseappcheck.googleapis.com/v1/jwks",
        ])
        // A cache file has nothing to cache without Firebase's set.
        let cache = withIssuer.replacingOccurrences(of: "jwks: { url: none }", with: "jwks: { url: none, cache_file: /tmp/x.json }")
        #expect(ConfigFixture.messages(cache) == ["3:34: app_check.jwks.cache_file has nothing to cache: app_check.jwks.url is none"])
    }

    // MARK: serving

    static func gateway(_ dir: Dir, appCheck: String, issuer: Bool = true) throws -> GatewayHarness {
        let key = try dir.signingKey()
        return try GatewayHarness { upstream in
            GatewayHarness.config(upstream: upstream, routes: """
              - name: api
                prefix: /api/
                upstream: api
                enforcement: enforce
              - name: watch
                prefix: /watch/
                upstream: api
                enforcement: monitor
            """, appCheck: appCheck, top: issuer ? Self.issuerSection(key: key) : "")
        }
    }

    static func call(_ gw: GatewayHarness, _ path: String, token: String) throws -> TestResponse {
        try RawHTTPClient.roundTrip(port: gw.port, "GET \(path) HTTP/1.1\r\nHost: gw\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
    }

    static func debugToken(_ gw: GatewayHarness) throws -> String {
        let body = #"{"debug_token":"\#(secret)"}"#
        let r = try RawHTTPClient.roundTrip(port: gw.port, """
            POST /appcheck/v1/projects/123456789012/apps/\(appId):exchangeDebugToken HTTP/1.1\r
            Host: gw\r
            Content-Type: application/json\r
            Content-Length: \(body.utf8.count)\r
            \r
            \(body)
            """, method: "POST")
        #expect(r.status == 200, "\(r.bodyText)")
        return try #require(try StrictJSON.parse(r.body).member("token")?.stringValue ?? nil)
    }

    @Test func anIssuerOnlyHostIsReadyAtOnceAndRefusesFirebaseTokensAsWrongIssuer() throws {
        let dir = try Dir()
        let firebase = try LocalIssuer()   // a stand-in for Firebase: its tokens carry Firebase's iss
        defer { firebase.stop() }
        let gw = try Self.gateway(dir, appCheck: "  jwks: { url: none }")
        defer { gw.stop() }
        try gw.waitUntilReady(timeout: 2)
        let own = try Self.debugToken(gw)
        #expect(try Self.call(gw, "/api/orders", token: own).status == 200)

        let foreign = try firebase.mint(appId: Self.appId)
        let refused = try Self.call(gw, "/api/orders", token: foreign)
        #expect(refused.status == 401 && refused.bodyText.contains("wrong_issuer"), "\(refused.status) \(refused.bodyText)")
        // On a monitor route it is forwarded, marked invalid with the same reason.
        let watched = try Self.call(gw, "/watch/x", token: foreign)
        #expect(watched.status == 200)
        #expect(gw.logged(#""reason":"wrong_issuer""#))
        // The own issuer's iss with a kid it does not have is an unknown kid, not a wrong issuer.
        let stranger = try RSAPrivateKey.generate(bits: 2048)
        let unknownKid = try TokenMinter.mintIssued(key: stranger, kid: "not-ours", issuerURL: "https://api.example.com/appcheck",
                                                    projectNumber: "123456789012", appId: Self.appId,
                                                    issuedAt: Int(Date().timeIntervalSince1970), ttl: 3600, provider: .debug)
        let kidRefused = try Self.call(gw, "/api/orders", token: unknownKid)
        #expect(kidRefused.status == 401 && kidRefused.bodyText.contains("unknown_kid"), "\(kidRefused.bodyText)")

        // Firebase's key set was never asked for: no fetch metrics, no fetch log line.
        let metrics = try RawHTTPClient.roundTrip(port: gw.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(!metrics.contains("appcheck_jwks_fetches_total"))
        #expect(!gw.logLines().contains { $0.contains("googleapis") })
    }

    @Test func trustedIssuersOnlyAreReadyOnceOneOfTheirSetsIsUsable() throws {
        let dir = try Dir()
        let other = try LocalIssuer()
        defer { other.stop() }
        let down = try Self.gateway(dir, appCheck: """
          jwks: { url: none }
          trusted_issuers:
            - { iss: "https://other.example.com/appcheck/123456789012", jwks_url: "http://127.0.0.1:9/jwks" }
        """, issuer: false)
        let readyz = try RawHTTPClient.roundTrip(port: down.adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n")
        down.stop()
        #expect(readyz.status == 503)
        #expect(readyz.bodyText.contains("trusted_issuers: no key set usable (https://other.example.com/appcheck/123456789012:"),
                "\(readyz.bodyText)")
        #expect(!readyz.bodyText.contains("googleapis"))

        let up = try Self.gateway(dir, appCheck: """
          jwks: { url: none }
          trusted_issuers:
            - { iss: "https://other.example.com/appcheck/123456789012", jwks_url: "http://127.0.0.1:9/jwks" }
            - { iss: "https://third.example.com/appcheck/123456789012", jwks_url: "\(other.jwksURL)" }
        """, issuer: false)
        defer { up.stop() }
        try up.waitUntilReady(timeout: 5)
        // The usable set's tokens verify; Firebase's are refused as wrong_issuer.
        let third = try TokenMinter.mintIssued(key: other.key, kid: other.kid, issuerURL: "https://third.example.com/appcheck",
                                               projectNumber: "123456789012", appId: Self.appId,
                                               issuedAt: Int(Date().timeIntervalSince1970), ttl: 3600, provider: .custom)
        #expect(try Self.call(up, "/api/x", token: third).status == 200)
        let firebase = try Self.call(up, "/api/x", token: try other.mint(appId: Self.appId))
        #expect(firebase.status == 401 && firebase.bodyText.contains("wrong_issuer"), "\(firebase.bodyText)")
    }

    // MARK: verify

    @Test func verifyChecksOwnTokensLocallyAndNamesTheKeySetItCouldNotFetch() throws {
        let dir = try Dir()
        let gw = try Self.gateway(dir, appCheck: "  jwks: { url: none }")
        let own = try Self.debugToken(gw)
        let configPath = gw.configPath
        gw.stop()
        // The harness removes its folder (the config) when it goes away: keep it until the end of the test.
        defer { withExtendedLifetime(gw) {} }
        let valid = try Run.command(Run.gatewayBinary, ["verify", "--config", configPath, "--", own])
        #expect(valid.status == 0 && valid.stdout.contains("verdict: valid app_id=\(Self.appId)"), "\(valid.stdout) \(valid.stderr)")

        let firebase = try LocalIssuer()
        defer { firebase.stop() }
        let foreign = try firebase.mint(appId: Self.appId)
        let wrong = try Run.command(Run.gatewayBinary, ["verify", "--config", configPath, "--", foreign])
        #expect(wrong.status == 1 && wrong.stdout.contains("verdict: invalid reason=wrong_issuer"), "\(wrong.stdout)")

        // With Firebase's set in use but unreachable, an own token still verifies, and a Firebase token's failure
        // names Firebase's set and its URL.
        let text = try String(contentsOfFile: configPath, encoding: .utf8)
            .replacingOccurrences(of: "jwks: { url: none }", with: #"jwks: { url: "http://127.0.0.1:9/jwks" }"#)
        let unreachable = dir.path("unreachable.yaml")
        try text.write(toFile: unreachable, atomically: true, encoding: .utf8)
        let ownAgain = try Run.command(Run.gatewayBinary, ["verify", "--config", unreachable, "--", own])
        #expect(ownAgain.status == 0, "\(ownAgain.stdout) \(ownAgain.stderr)")
        let cannot = try Run.command(Run.gatewayBinary, ["verify", "--config", unreachable, "--timeout", "2", "--", foreign])
        #expect(cannot.status == 2)
        #expect(cannot.stderr.contains("cannot fetch the key set of Firebase (iss https://firebaseappcheck.googleapis.com/123456789012) from http://127.0.0.1:9/jwks"),
                "\(cannot.stderr)")
    }
}
