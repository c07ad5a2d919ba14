import AppCheck
import Foundation
import Testing
import TestSupport
@testable import Gateway

/// `exchangeDeviceCheckToken` and `exchangeCustomToken` on the running gateway (docs/issuer.md): DeviceCheck against
/// a fake Apple server that checks the ES256 bearer token and the body as Apple does (Apple cannot be reached from
/// here), custom tokens signed by a test backend's RS256 and ES256 keys published as a `file://` JWKS. Each rule of
/// the two methods has its case; the log line names the rule, the response only the category.
@Suite(.serialized) struct IssuerDeviceCheckAndCustomTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
    static let otherApp = "1:123456789012:ios:ffffffffffffffff"
    static let base = "/appcheck/v1/projects/123456789012/apps/\(appId)"
    static let issuerURL = "https://api.example.com/appcheck"
    static let backend = "backend@example.com"
    static let keyId = "ABC123DEFG"
    static let teamId = "ABCDE12345"

    /// A gateway whose app has `device_check` pointed at a fake Apple, and one custom-token backend.
    final class Rig: @unchecked Sendable {
        let dir: URL
        let apple: FakeDeviceCheckServer
        let rsa: RSAPrivateKey
        let es256: ES256PrivateKey
        let gateway: GatewayHarness

        /// - Parameter appleKnowsOurKey: false = the fake Apple holds another public key (our `.p8` is "revoked").
        init(appleKnowsOurKey: Bool = true, hangSeconds: Double = 30) throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-dc-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let signing = dir.appendingPathComponent("sign.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: signing, atomically: true, encoding: .utf8)
            let p8 = try ES256PrivateKey.generate()
            let p8Path = dir.appendingPathComponent("AuthKey_\(IssuerDeviceCheckAndCustomTests.keyId).p8").path
            try p8.pemRepresentation().write(toFile: p8Path, atomically: true, encoding: .utf8)
            apple = try FakeDeviceCheckServer(publicKey: appleKnowsOurKey ? p8.publicKey : ES256PrivateKey.generate().publicKey,
                                              keyId: IssuerDeviceCheckAndCustomTests.keyId,
                                              teamId: IssuerDeviceCheckAndCustomTests.teamId, hangSeconds: hangSeconds)
            rsa = try RSAPrivateKey.generate(bits: 2048)
            es256 = try ES256PrivateKey.generate()
            let jwks = dir.appendingPathComponent("backend-jwks.json").path
            try Self.jwks(rsa: rsa.publicKey, es256: es256.publicKey).write(toFile: jwks, atomically: true, encoding: .utf8)
            let appleURL = apple.url
            gateway = try GatewayHarness { upstream in
                GatewayHarness.config(upstream: upstream, routes: """
                  - name: open
                    prefix: /
                    upstream: api
                    enforcement: off
                """, appCheck: """
                  clock_skew: 1s
                  jwks: { url: "http://127.0.0.1:9/jwks" }
                """, top: """
                issuer:
                  base_path: /appcheck
                  issuer_url: \(IssuerDeviceCheckAndCustomTests.issuerURL)
                  signing_keys: [\(signing)]
                  max_exchanges_per_second: 1000
                  apps:
                    - app_id: "\(IssuerDeviceCheckAndCustomTests.appId)"
                      team_id: \(IssuerDeviceCheckAndCustomTests.teamId)
                      bundle_id: com.example.app
                      device_check:
                        key_id: \(IssuerDeviceCheckAndCustomTests.keyId)
                        private_key: \(p8Path)
                        environment: development
                        api_url: \(appleURL)
                    - app_id: "\(IssuerDeviceCheckAndCustomTests.otherApp)"
                  custom_token_issuers:
                    - iss: \(IssuerDeviceCheckAndCustomTests.backend)
                      jwks_url: file://\(jwks)
                """)
            }
        }

        /// A JWKS with one RSA key (`kid` `rsa-1`) and one P-256 key (`kid` `ec-1`).
        static func jwks(rsa: RSAPublicKey, es256: ES256PublicKey) throws -> String {
            let rsaDocument = JWKSet.document(for: [(kid: "rsa-1", key: rsa)])
            let point = try #require(es256.derRepresentation).suffix(64)
            let ec = #"{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"ec-1","x":"\#(Base64URL.encode(Array(point.prefix(32))))","y":"\#(Base64URL.encode(Array(point.suffix(32))))"}"#
            let open = try #require(rsaDocument.range(of: "[", options: []))
            return rsaDocument.replacingCharacters(in: open, with: "[" + ec + ",")
        }

        func stop() {
            gateway.stop()
            apple.stop()
            try? FileManager.default.removeItem(at: dir)
        }

        func post(_ method: String, _ body: String, app: String = IssuerDeviceCheckAndCustomTests.appId) throws -> TestResponse {
            let path = "/appcheck/v1/projects/123456789012/apps/\(app):\(method)"
            return try RawHTTPClient.roundTrip(port: gateway.port, "POST \(path) HTTP/1.1\r\nHost: gw\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n\(body)",
                                               method: "POST", timeout: 60)
        }

        func deviceCheck(_ device: String, limitedUse: Bool = false) throws -> TestResponse {
            try post("exchangeDeviceCheckToken",
                     #"{"device_token":"\#(Data(device.utf8).base64EncodedString())","limited_use":\#(limitedUse)}"#)
        }

        func custom(_ token: String) throws -> TestResponse {
            try post("exchangeCustomToken", #"{"customToken":"\#(token)"}"#)
        }

        /// The issuer's log line for the `n`-th exchange of `method` (0-based). The line is written when the exchange
        /// ends, just after the response is sent, so it is waited for (up to 10 s).
        func issuerLine(_ method: String, _ n: Int = 0) -> String {
            let deadline = Date().addingTimeInterval(10)
            var lines: [String] = []
            repeat {
                lines = gateway.logLines().filter { $0.contains(#""message":"issuer exchange""#) && $0.contains(#""method":"\#(method)""#) }
                if n < lines.count { return lines[n] }
                usleep(20_000)
            } while Date() < deadline
            return "(no line \(n) for \(method) in \(lines))"
        }

        /// A custom token; `claims` replace or add to the valid defaults (`nil` removes one).
        func customToken(alg: String = "RS256", kid: String? = nil, claims: [String: String?] = [:],
                         signer: RSAPrivateKey? = nil, extraHeader: String = "") throws -> String {
            let now = Int(Date().timeIntervalSince1970)
            var all: [String: String?] = [
                "iss": JSONText.quote(IssuerDeviceCheckAndCustomTests.backend),
                "aud": JSONText.quote(IssuerDeviceCheckAndCustomTests.issuerURL),
                "sub": JSONText.quote(IssuerDeviceCheckAndCustomTests.appId),
                "iat": "\(now)", "exp": "\(now + 120)",
                "jti": JSONText.quote(UUID().uuidString),
            ]
            for (k, v) in claims { all[k] = v }
            let payload = "{" + all.keys.sorted().compactMap { k in all[k]!.map { "\(JSONText.quote(k)):\($0)" } }.joined(separator: ",") + "}"
            let header = #"{"alg":"\#(alg)","kid":"\#(kid ?? (alg == "ES256" ? "ec-1" : "rsa-1"))","typ":"JWT"\#(extraHeader)}"#
            if alg == "ES256" {
                return try TokenMinter.mintRawES256(headerJSON: Array(header.utf8), payloadJSON: Array(payload.utf8), key: es256)
            }
            return try TokenMinter.mintRaw(headerJSON: header, payloadJSON: payload, key: signer ?? rsa)
        }
    }

    /// The claims of a minted token in a `{"token","ttl"}` response.
    static func claims(_ r: TestResponse) throws -> JSONValue {
        let token = try #require(try StrictJSON.parse(r.body).member("token")?.stringValue)
        let payload = try #require(Base64URL.decode(Array(token.utf8).split(separator: UInt8(ascii: "."))[1]))
        return try StrictJSON.parse(payload)
    }

    /// The Google-style `error.status` of a refusal; a body that is not that shape fails the test (it throws).
    static func status(_ r: TestResponse) throws -> String {
        try #require(try StrictJSON.parse(r.body).member("error")?.member("status")?.stringValue, "\(r.bodyText)")
    }

    // MARK: DeviceCheck

    @Test func aValidDeviceTokenIsExchangedOnce() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let first = try rig.deviceCheck("valid-device-1", limitedUse: true)
        #expect(first.status == 200, "\(first.bodyText)")
        let claims = try Self.claims(first)
        #expect(claims.member("provider")?.stringValue == "device_check")
        #expect(claims.member("sub")?.stringValue == Self.appId)
        #expect(claims.member("iss")?.stringValue == "\(Self.issuerURL)/123456789012")
        #expect(try StrictJSON.parse(first.body).member("ttl")?.stringValue == "300s")

        // Apple got the token as standard base64, a transaction ID and a millisecond timestamp (the fake checks them).
        let body = try StrictJSON.parse(Array(try #require(rig.apple.bodies.first).utf8))
        #expect(body.member("device_token")?.stringValue == Data("valid-device-1".utf8).base64EncodedString())

        let again = try rig.deviceCheck("valid-device-1")
        #expect(try again.status == 403 && Self.status(again) == "PERMISSION_DENIED", "\(again.bodyText)")
        #expect(rig.issuerLine("exchangeDeviceCheckToken", 1).contains(#""rule":"device_token_reused""#))

        // A second device: minted, and the bearer token made for the first call was reused (cached up to 20 min).
        #expect(try rig.deviceCheck("valid-device-2").status == 200)
        let bearers = rig.apple.bearers
        #expect(bearers.count == 3 && Set(bearers).count == 1, "\(bearers.count) calls, \(Set(bearers).count) bearer tokens")
        let metrics = try RawHTTPClient.roundTrip(port: rig.gateway.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains(#"appcheck_issuer_exchanges_total{app_id="\#(Self.appId)",method="exchangeDeviceCheckToken",result="minted"} 2"#))
    }

    @Test func appleRefusingTheDeviceTokenIsPermissionDeniedWithItsReasonInTheLogOnly() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let r = try rig.deviceCheck("bad-device")
        #expect(try r.status == 403 && Self.status(r) == "PERMISSION_DENIED")
        #expect(!r.bodyText.contains("Bad Device Token"), "Apple's reason must not reach the client")
        let line = rig.issuerLine("exchangeDeviceCheckToken")
        #expect(line.contains(#""rule":"devicecheck_refused""#) && line.contains(#""detail":"Bad Device Token""#), "\(line)")
        // A refused token is not recorded: were Apple to accept it later, it could still be exchanged.
        #expect(rig.apple.calls == 1)
    }

    @Test func appleFailingOrSilentIsUnavailableAndMintsNothing() throws {
        let rig = try Rig(hangSeconds: 30)
        defer { rig.stop() }
        let failing = try rig.deviceCheck("error-500")
        #expect(try failing.status == 503 && Self.status(failing) == "UNAVAILABLE", "\(failing.bodyText)")
        #expect(rig.issuerLine("exchangeDeviceCheckToken").contains(#""rule":"devicecheck_unavailable""#))

        let silent = try rig.deviceCheck("hang-forever")
        // The gateway gives up on its own deadline (5 s), before the fake Apple closes the connection (30 s): the
        // log says "timed out".
        #expect(silent.status == 503, "\(silent.status) \(silent.bodyText)")
        let line = rig.issuerLine("exchangeDeviceCheckToken", 1)
        #expect(line.contains(#""rule":"devicecheck_unavailable""#) && line.contains("timed out"), "\(line)")

        // Nothing was recorded for the silent call: the same token works once Apple answers (here: a new token).
        #expect(try rig.deviceCheck("valid-after-outage").status == 200)
    }

    @Test func appleRefusingOurKeyIsUnavailableAndSaysSoToTheOperator() throws {
        let rig = try Rig(appleKnowsOurKey: false)
        defer { rig.stop() }
        let r = try rig.deviceCheck("valid-device")
        #expect(try r.status == 503 && Self.status(r) == "UNAVAILABLE", "\(r.bodyText)")
        #expect(rig.issuerLine("exchangeDeviceCheckToken").contains(#""rule":"devicecheck_key_refused""#))
        _ = rig.issuerLine("exchangeDeviceCheckToken")
        let ops = rig.gateway.logLines().filter { $0.contains("DeviceCheck refused the configured key") }
        #expect(ops.count == 1 && ops[0].contains(#""severity":"ERROR""#) && ops[0].contains(#""apple_status":401"#), "\(ops)")
    }

    @Test func malformedDeviceTokensAreInvalidArgumentAndNeverReachApple() throws {
        let rig = try Rig()
        defer { rig.stop() }
        for body in [#"{}"#, #"{"device_token":"***"}"#, #"{"device_token":""}"#, #"{"device_token":"dmFsaWQ=","limited_use":"yes"}"#] {
            let r = try rig.post("exchangeDeviceCheckToken", body)
            #expect(try r.status == 400 && Self.status(r) == "INVALID_ARGUMENT", "\(body): \(r.bodyText)")
        }
        // An app without device_check has no such method.
        let other = try rig.post("exchangeDeviceCheckToken", #"{"device_token":"dmFsaWQ="}"#, app: Self.otherApp)
        #expect(other.status == 404)
        #expect(rig.apple.calls == 0)
    }

    // MARK: custom tokens

    @Test func customTokensSignedRS256OrES256AreExchangedOnce() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let rs = try rig.customToken()
        let first = try rig.custom(rs)
        #expect(first.status == 200, "\(first.bodyText)")
        #expect(try Self.claims(first).member("provider")?.stringValue == "custom")
        let reused = try rig.custom(rs)
        #expect(reused.status == 403, "\(reused.bodyText)")
        #expect(rig.issuerLine("exchangeCustomToken", 1).contains(#""rule":"custom_token_reused""#))

        #expect(try rig.custom(rig.customToken(alg: "ES256")).status == 200)
        // `app_id` names the app when present, whatever `sub` says; any configured app can use custom tokens.
        let byAppId = try rig.customToken(claims: ["sub": JSONText.quote("user-42"), "app_id": JSONText.quote(Self.otherApp)])
        #expect(try rig.post("exchangeCustomToken", #"{"custom_token":"\#(byAppId)"}"#, app: Self.otherApp).status == 200)
        // An array `aud` holding the issuer's URL is accepted too.
        let arrayAud = try rig.customToken(claims: ["aud": #"["other","\#(Self.issuerURL)"]"#])
        #expect(try rig.custom(arrayAud).status == 200)
    }

    /// Each rule of a custom token, broken alone.
    @Test func everyCustomTokenRuleHasItsRefusal() throws {
        let rig = try Rig()
        defer { rig.stop() }
        let now = Int(Date().timeIntervalSince1970)
        let cases: [(String, String, Int)] = [
            (try rig.customToken(claims: ["iat": "\(now)", "exp": "\(now + 301)"]), "custom_token_lifetime_too_long", 403),
            (try rig.customToken(claims: ["aud": JSONText.quote("https://elsewhere.example.com")]), "custom_token_wrong_audience", 403),
            (try rig.customToken(claims: ["sub": JSONText.quote(Self.otherApp)]), "custom_token_wrong_app", 403),
            (try rig.customToken(claims: ["app_id": JSONText.quote(Self.otherApp)]), "custom_token_wrong_app", 403),
            (try rig.customToken(signer: RSAPrivateKey.generate(bits: 2048)), "custom_token_bad_signature", 403),
            (try rig.customToken(kid: "rsa-unknown"), "custom_token_unknown_kid", 403),
            (try rig.customToken(alg: "RS256", kid: "ec-1"), "custom_token_unknown_kid", 403),
            (try rig.customToken(claims: ["iss": JSONText.quote("someone@else.example.com")]), "custom_token_issuer_unknown", 403),
            (try rig.customToken(claims: ["iat": "\(now - 200)", "exp": "\(now - 100)"]), "custom_token_expired", 403),
            (try rig.customToken(claims: ["iat": "\(now + 100)", "exp": "\(now + 200)"]), "custom_token_issued_in_future", 403),
            (try rig.customToken(claims: ["exp": nil]), "custom_token_malformed", 400),
            (try rig.customToken(alg: "HS256"), "custom_token_algorithm", 403),
            // RFC 7515 §4.1.11: an extension named in `crit` must be understood; none is, so any `crit` is refused.
            (try rig.customToken(extraHeader: #","crit":["exp"]"#), "custom_token_crit", 403),
            (try rig.customToken(alg: "ES256", extraHeader: #","crit":["b64"],"b64":true"#), "custom_token_crit", 403),
            ("not.a-token", "custom_token_malformed", 400),
        ]
        for (n, (token, rule, status)) in cases.enumerated() {
            let r = try rig.custom(token)
            #expect(r.status == status, "\(rule): \(r.bodyText)")
            let line = rig.issuerLine("exchangeCustomToken", n)
            #expect(line.contains(#""rule":"\#(rule)""#), "expected \(rule): \(line)")
            #expect(!line.contains(token), "the log line carries the token")
        }
    }

    /// Issue 23 #3: a custom token is exchanged once whatever its encoding. ECDSA signatures are malleable — (r, n − s)
    /// verifies as well as (r, s) — and base64url may spell the same signature bytes in more than one way; neither
    /// makes a new token.
    @Test func aCustomTokenIsOnceWhateverItsSignatureEncoding() throws {
        let rig = try Rig()
        defer { rig.stop() }
        for _ in 0..<4 {
            let token = try rig.customToken(alg: "ES256")
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            let signature = try #require(Base64URL.decode(Array(parts[2].utf8)))
            #expect(signature.count == 64)
            let twinSignature = Array(signature[..<32]) + Self.p256Negate(Array(signature[32...]))
            let twin = "\(parts[0]).\(parts[1]).\(Base64URL.encode(twinSignature))"
            // Both twins verify: whichever is presented first mints, the other is the same token.
            let (first, second) = Bool.random() ? (token, twin) : (twin, token)
            let minted = try rig.custom(first)
            #expect(minted.status == 200, "\(minted.bodyText)")
            let again = try rig.custom(second)
            #expect(again.status == 403, "the (r, n − s) twin was exchanged again: \(again.bodyText)")
        }
        #expect(rig.issuerLine("exchangeCustomToken", 7).contains(#""rule":"custom_token_reused""#))
        let reused = rig.gateway.logLines().filter { $0.contains(#""rule":"custom_token_reused""#) }.count
        #expect(reused == 4)

        // RS256: the last base64url character of a 256-byte signature carries 4 unused bits; another spelling of
        // the same bytes is refused (as malformed, or as the same token), never exchanged again.
        let rs = try rig.customToken()
        #expect(try rig.custom(rs).status == 200)
        var chars = Array(rs)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let last = try #require(alphabet.firstIndex(of: chars[chars.count - 1]))
        chars[chars.count - 1] = alphabet[last ^ 1]
        let respelled = try rig.custom(String(chars))
        #expect(respelled.status == 403 || respelled.status == 400, "\(respelled.bodyText)")
    }

    /// n − s for P-256's group order n (big-endian, 32 bytes).
    static func p256Negate(_ s: [UInt8]) -> [UInt8] {
        let n: [UInt8] = [
            0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
            0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
        ]
        var out = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for i in stride(from: 31, through: 0, by: -1) {
            var d = Int(n[i]) - Int(s[i]) - borrow
            borrow = d < 0 ? 1 : 0
            if d < 0 { d += 256 }
            out[i] = UInt8(d)
        }
        return out
    }
}
