import AppCheck
import Foundation
@testable import Gateway
@testable import GatewayConfig
@testable import Issuer
import TestSupport
import Testing

/// OIDC discovery for minted tokens (docs/issuer.md, "OIDC discovery"): the document's path follows `iss`, which may
/// lie outside the base path; its fields name `iss` exactly and the key set under the base path; it is answered
/// before routes over HTTP/1.1 and h2c, with HEAD, cacheable, and counted like the key set.
@Suite(.serialized) struct IssuerDiscoveryTests {
    static let number = "123456789012"
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"

    @Test func theDiscoveryPathIsThePathOfIssFollowedByTheWellKnownSuffix() {
        func path(_ url: String) -> String? { IssuerPath.discoveryPath(issuerURL: url, projectNumber: Self.number) }
        #expect(path("https://api.example.com/appcheck") == "/appcheck/123456789012/.well-known/openid-configuration")
        #expect(path("https://api.example.com") == "/123456789012/.well-known/openid-configuration")
        #expect(path("http://127.0.0.1:8080/a/b") == "/a/b/123456789012/.well-known/openid-configuration")
        #expect(path("https://api.example.com/%7Etenant") == "/~tenant/123456789012/.well-known/openid-configuration")
        #expect(IssuerURLParts("https://api.example.com:8443/appcheck").origin == "https://api.example.com:8443")
        #expect(IssuerURLParts("https://[::1]:8443").origin == "https://[::1]:8443")
        #expect(IssuerURLParts("https://[::1]:8443").path == "")

        let discovery = "/appcheck/v1/123456789012/.well-known/openid-configuration"
        // Looked at first, even under `<base>/v1/`; everything else matches as before.
        #expect(IssuerPath.match(Substring(discovery), basePath: "/appcheck", discoveryPath: discovery) == .discovery)
        #expect(IssuerPath.match("/appcheck/v1/jwks", basePath: "/appcheck", discoveryPath: discovery) == .jwks)
        #expect(IssuerPath.match("/appcheck/v1/999/.well-known/openid-configuration", basePath: "/appcheck",
                                 discoveryPath: discovery) == .unknown(rule: "unknown_resource"))
        #expect(IssuerPath.match("/tenant/123456789012/.well-known/openid-configuration", basePath: "/appcheck",
                                 discoveryPath: discovery) == nil)
    }

    @Test func theDocumentNamesIssExactlyAndTheKeySetUnderTheBasePath() throws {
        var settings = IssuerSettings()
        settings.basePath = "/appcheck"
        settings.issuerURL = "https://api.example.com:8443/tenant"
        let text = IssuerService.discoveryJSON(settings, projectNumber: Self.number)
        let doc = try StrictJSON.parse(Array(text.utf8))
        #expect(doc.member("issuer")?.stringValue == "https://api.example.com:8443/tenant/123456789012")
        #expect(doc.member("jwks_uri")?.stringValue == "https://api.example.com:8443/appcheck/v1/jwks")
        #expect(doc.member("authorization_endpoint")?.stringValue == "urn:appcheck-gateway:programmatic_exchange")
        #expect(text.contains(#""response_types_supported":["id_token"]"#))
        #expect(text.contains(#""subject_types_supported":["public"]"#))
        #expect(text.contains(#""id_token_signing_alg_values_supported":["RS256"]"#))
        #expect(text.contains(#""claims_supported":["iss","sub","aud","iat","exp","jti","provider","risk","cnf"]"#))
        #expect(!text.contains(#"\/"#), "slashes are not escaped")
    }

    /// A gateway whose issuer_url path (`issuerPath`) and base path (`/appcheck`) are given apart.
    static func gateway(issuerURL: String, dir: URL) throws -> GatewayHarness {
        let key = dir.appendingPathComponent("sign.pem").path
        try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: key, atomically: true, encoding: .utf8)
        return try GatewayHarness { upstream in
            GatewayHarness.config(upstream: upstream, routes: """
              - name: open
                prefix: /
                upstream: api
                enforcement: off
            """, appCheck: """
              jwks: { url: none }
            """, top: """
            issuer:
              base_path: /appcheck
              issuer_url: \(issuerURL)
              signing_keys: [\(key)]
              state: { store: memory }
              apps:
                - app_id: "\(appId)"
                  debug_secrets: ["discovery-test-secret-0123456789"]
            """)
        }
    }

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("discovery-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func servedBeforeRoutesOverHTTP1WithHeadAndCacheHeaders() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let gw = try Self.gateway(issuerURL: "https://api.example.com:8443/tenant", dir: dir)
        defer { gw.stop() }
        let path = "/tenant/123456789012/.well-known/openid-configuration"
        func request(_ verb: String, _ target: String) throws -> TestResponse {
            let body = verb == "POST" ? "Content-Length: 0\r\n" : ""
            return try RawHTTPClient.roundTrip(port: gw.port, "\(verb) \(target) HTTP/1.1\r\nHost: gw\r\n\(body)\r\n", method: verb)
        }
        let r = try request("GET", path)
        #expect(r.status == 200, "\(r.bodyText)")
        #expect(r.header("Content-Type") == "application/json")
        #expect(r.header("Cache-Control") == "public, max-age=3600")
        let doc = try StrictJSON.parse(r.body)
        #expect(doc.member("issuer")?.stringValue == "https://api.example.com:8443/tenant/123456789012")
        #expect(doc.member("jwks_uri")?.stringValue == "https://api.example.com:8443/appcheck/v1/jwks")
        // The key set it names is the one served under the base path.
        #expect(try request("GET", "/appcheck/v1/jwks").status == 200)
        // A query does not change the document; a dot-segment is normalised first.
        #expect(try request("GET", path + "?x=1").body == r.body)
        #expect(try request("GET", "/tenant/x/../123456789012/.well-known/openid-configuration").body == r.body)

        let head = try request("HEAD", path)
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(head.header("Content-Length") == "\(r.body.count)")
        #expect(head.header("Cache-Control") == "public, max-age=3600")
        let post = try request("POST", path)
        #expect(post.status == 404 && post.bodyText.contains("NOT_FOUND"), "\(post.bodyText)")
        // Another project's path is not the issuer's: it goes to the routes (here the upstream, through `off`).
        let other = try request("GET", "/tenant/999/.well-known/openid-configuration")
        #expect(other.status == 200 && !other.bodyText.contains("jwks_uri"))

        let metrics = try RawHTTPClient.roundTrip(port: gw.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains(#"appcheck_issuer_exchanges_total{app_id="",method="discovery",result="discovery"} 4"#),
                "\(metrics.split(separator: "\n").filter { $0.contains("issuer_exchanges") })")
        #expect(gw.logged(#""method":"discovery""#))
    }

    @Test func h2cClientsGetTheSameDocument() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // The issuer URL's path is the base path itself: the document sits under it, beside `/v1/`.
        let gw = try Self.gateway(issuerURL: "https://api.example.com/appcheck", dir: dir)
        defer { gw.stop() }
        let url = "http://127.0.0.1:\(gw.port)/appcheck/123456789012/.well-known/openid-configuration"
        let r = try Run.command("curl", ["-sS", "--http2-prior-knowledge", "-D", "-", "-w", "\n%{http_code} %{http_version}", url])
        #expect(r.stdout.hasSuffix("\n200 2"), "\(r.stdout) \(r.stderr)")
        let lower = r.stdout.lowercased()
        #expect(lower.contains("content-type: application/json"))
        #expect(lower.contains("cache-control: public, max-age=3600"))
        #expect(r.stdout.contains(#""issuer":"https://api.example.com/appcheck/123456789012""#))
        #expect(r.stdout.contains(#""jwks_uri":"https://api.example.com/appcheck/v1/jwks""#))
        let head = try Run.command("curl", ["-sS", "--http2-prior-knowledge", "-I", "-w", "%{http_code}", url])
        #expect(head.stdout.hasSuffix("200"), "\(head.stdout) \(head.stderr)")
        #expect(head.stdout.lowercased().contains("cache-control: public, max-age=3600"))
    }
}
