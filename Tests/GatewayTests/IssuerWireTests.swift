import AppCheck
import Foundation
import Testing
@testable import Gateway

/// The issuer's wire layer (docs/issuer.md): paths, JSON bodies in both spellings, base64 variants, the response and
/// error shapes, the rate limiter and the debug-secret comparison.
@Suite struct IssuerWireTests {
    @Test func pathsUnderTheBasePath() {
        #expect(IssuerPath.match("/appcheck/v1/jwks", basePath: "/appcheck") == .jwks)
        #expect(IssuerPath.match("/appcheck/v1/projects/123/apps/1:123:ios:ab:exchangeDebugToken", basePath: "/appcheck")
                == .method(project: "123", appId: "1:123:ios:ab", method: .exchangeDebugToken))
        #expect(IssuerPath.match("/appcheck/v1/projects/demo/apps/1:1:ios:ab:generateAppAttestChallenge", basePath: "/appcheck")
                == .method(project: "demo", appId: "1:1:ios:ab", method: .generateAppAttestChallenge))
        #expect(IssuerPath.match("/appcheck/v1/projects/1/apps/1:1:ios:ab:mintAppCheckToken", basePath: "/appcheck")
                == .unknown(rule: "unknown_method"))
        #expect(IssuerPath.match("/appcheck/v1/projects/1/apps/x", basePath: "/appcheck") == .unknown(rule: "no_method"))
        #expect(IssuerPath.match("/appcheck/v1/projects//apps/1:1:ios:ab:exchangeDebugToken", basePath: "/appcheck")
                == .unknown(rule: "unknown_resource"))
        #expect(IssuerPath.match("/appcheck/v1/jwks/extra", basePath: "/appcheck") == .unknown(rule: "unknown_resource"))
        #expect(IssuerPath.match("/appcheck/v2/jwks", basePath: "/appcheck") == nil)
        #expect(IssuerPath.match("/appcheckx/v1/jwks", basePath: "/appcheck") == nil)
        #expect(IssuerPath.match("/api/v1/jwks", basePath: "/appcheck") == nil)
    }

    @Test func fieldsInEitherSpelling() throws {
        let snake = try IssuerJSON(body: Array(#"{"key_id":"a2V5","limited_use":true,"attestation_statement":"AQID","challenge":"Y2g="}"#.utf8))
        #expect(try snake.bytes("key_id") == Array("key".utf8))
        #expect(try snake.limitedUse() == true)
        #expect(try snake.bytes("attestation", aliases: ["attestation_statement", "attestationStatement"]) == [1, 2, 3])
        let camel = try IssuerJSON(body: Array(#"{"keyId":"a2V5","limitedUse":false,"attestation":"AQID","unknownField":1}"#.utf8))
        #expect(try camel.bytes("key_id") == Array("key".utf8))
        #expect(try camel.limitedUse() == false)
        #expect(try camel.bytes("attestation", aliases: ["attestation_statement", "attestationStatement"]) == [1, 2, 3])
        #expect(try IssuerJSON(body: []).limitedUse() == false)
        #expect(try IssuerJSON(body: Array("{}".utf8)).limitedUse() == false)
    }

    @Test func badBodiesAreInvalidArgument() throws {
        func rule(_ body: String, _ read: (IssuerJSON) throws(IssuerError) -> Void) -> String? {
            do {
                let json = try IssuerJSON(body: Array(body.utf8))
                try read(json)
                return nil
            } catch {
                #expect(error.code == 400 && error.status == "INVALID_ARGUMENT")
                return error.rule
            }
        }
        #expect(rule("{", { _ in }) == "body_not_json")
        #expect(rule("[]", { _ in }) == "body_not_object")
        #expect(rule(#"{"a":1,"a":2}"#, { _ in }) == "body_not_json")  // duplicate keys
        #expect(rule(#"{"key_id":"AQ==","keyId":"AQ=="}"#, { j throws(IssuerError) in _ = try j.bytes("key_id") }) == "field_twice")
        #expect(rule(#"{"limited_use":"true"}"#, { j throws(IssuerError) in _ = try j.limitedUse() }) == "invalid_limited_use")
        #expect(rule(#"{}"#, { j throws(IssuerError) in _ = try j.bytes("challenge") }) == "missing_challenge")
        #expect(rule(#"{"challenge":5}"#, { j throws(IssuerError) in _ = try j.bytes("challenge") }) == "invalid_challenge")
        #expect(rule(#"{"challenge":"***"}"#, { j throws(IssuerError) in _ = try j.bytes("challenge") }) == "invalid_base64_challenge")
        let big = "{\"x\":\"" + String(repeating: "a", count: 65 * 1024) + "\"}"
        do {
            _ = try IssuerJSON(body: Array(big.utf8))
            Issue.record("a 65 KiB body was accepted")
        } catch {
            #expect(error.code == 413 && error.rule == "body_too_large")
        }
    }

    @Test func base64Variants() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF, 0x01]
        #expect(IssuerJSON.encodeBase64(bytes) == "+/+/AQ==")
        #expect(IssuerJSON.decodeBase64("+/+/AQ==") == bytes)   // standard, padded
        #expect(IssuerJSON.decodeBase64("+/+/AQ") == bytes)     // standard, unpadded
        #expect(IssuerJSON.decodeBase64("-_-_AQ") == bytes)     // base64url
        #expect(IssuerJSON.decodeBase64("-_-_AQ==") == bytes)   // base64url, padded
        #expect(IssuerJSON.decodeBase64("+_-/AQ") == nil)       // mixed alphabets
        #expect(IssuerJSON.decodeBase64("+/+/AQ=") == nil)      // wrong padding
        #expect(IssuerJSON.decodeBase64("+/+/AR==") == nil)     // non-canonical trailing bits
        #expect(IssuerJSON.decodeBase64("+/+/ AQ==") == nil)    // whitespace
        for n in 0..<40 {
            let sample = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(IssuerJSON.decodeBase64(IssuerJSON.encodeBase64(sample)) == sample)
        }
    }

    @Test func responseAndErrorShapes() throws {
        #expect(String(decoding: IssuerResponse.challenge([1, 2, 3], ttl: 300), as: UTF8.self) == #"{"challenge":"AQID","ttl":"300s"}"#)
        #expect(String(decoding: IssuerResponse.token("a.b.c", ttl: 3600), as: UTF8.self) == #"{"token":"a.b.c","ttl":"3600s"}"#)
        #expect(String(decoding: IssuerResponse.attestation(artifact: [0xFF], token: "t", ttl: 60), as: UTF8.self)
                == #"{"artifact":"/w==","appCheckToken":{"token":"t","ttl":"60s"}}"#)
        let denied = IssuerError.permissionDenied("nonce_mismatch")
        let body = try StrictJSON.parse(denied.body)
        #expect(body.member("error")?.member("code")?.numberValue == 403)
        #expect(body.member("error")?.member("status")?.stringValue == "PERMISSION_DENIED")
        #expect(!String(decoding: denied.body, as: UTF8.self).contains("nonce"), "the response never names the rule")
        #expect(IssuerError.rateLimited.metricResult == "resource_exhausted")
        #expect(IssuerError.bodyTooLarge.code == 413 && IssuerError.bodyTooLarge.status == "INVALID_ARGUMENT")
    }

    @Test func rateLimiterAdmitsTheRateAndRefillsWithTime() {
        let limiter = ExchangeRateLimiter(ratePerSecond: 5, now: 100)
        #expect((0..<5).allSatisfy { _ in limiter.admit(now: 100) })
        #expect(!limiter.admit(now: 100))
        #expect(limiter.admit(now: 100.2))      // one token back after 1/5 s
        #expect(!limiter.admit(now: 100.2))
        #expect((0..<5).filter { _ in limiter.admit(now: 200) }.count == 5, "the bucket never holds more than a second's worth")
        #expect(!limiter.admit(now: 99), "a clock that goes back admits nothing extra")
    }

    @Test func debugSecretsMatchExactly() {
        let secrets = DebugSecrets(["0123456789abcdef", "another-secret-of-some-length"])
        #expect(secrets.matches("0123456789abcdef"))
        #expect(secrets.matches("another-secret-of-some-length"))
        #expect(!secrets.matches("0123456789abcdeF"))
        #expect(!secrets.matches("0123456789abcdef0"))
        #expect(!secrets.matches("0123456789abcde"))
        #expect(!secrets.matches(""))
        #expect(!DebugSecrets([]).matches(""))
    }
}
