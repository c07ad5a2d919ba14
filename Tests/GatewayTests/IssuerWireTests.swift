import AppCheck
import EventLoop
import Foundation
@testable import Gateway
@testable import ProxyCore
@testable import Issuer
import Testing

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

    @Test func processCeilingAdmitsTheRateAndRefillsWithTime() {
        let limits = IssuerLimits(perSecond: 5, perAddress: 0)
        func admit(_ now: Double) -> Bool { limits.admit(address: "a", appId: "x", now: now) == .admitted }
        #expect((0..<5).allSatisfy { _ in admit(100) })
        #expect(limits.admit(address: "a", appId: "x", now: 100) == .refused("rate_limited"))
        #expect(admit(100.2))      // one token back after 1/5 s
        #expect(!admit(100.2))
        #expect((0..<5).filter { _ in admit(200) }.count == 5, "the bucket never holds more than a second's worth")
        #expect(!admit(99), "a clock that goes back admits nothing extra")
    }

    @Test func oneAddressCannotSpendAnothersShare() {
        let limits = IssuerLimits(perSecond: 100, perAddress: 5)
        // Burst twice the per-address rate, then refused for that address only, without charging the ceiling.
        #expect((0..<10).allSatisfy { _ in limits.admit(address: "10.0.0.1", appId: "x", now: 0) == .admitted })
        for _ in 0..<1000 { #expect(limits.admit(address: "10.0.0.1", appId: "x", now: 0) == .refused("rate_limited_address")) }
        #expect((0..<10).allSatisfy { _ in limits.admit(address: "10.0.0.2", appId: "x", now: 0) == .admitted })
        #expect(limits.admit(address: "10.0.0.1", appId: "x", now: 0.2) == .admitted, "one token back after 1/5 s")
    }

    @Test func perAppLimitUnderTheCeiling() {
        let limits = IssuerLimits(perSecond: 100, perAddress: 0, perApp: ["busy": 3])
        #expect((0..<3).allSatisfy { _ in limits.admit(address: "a", appId: "busy", now: 0) == .admitted })
        #expect(limits.admit(address: "a", appId: "busy", now: 0) == .refused("rate_limited_app"))
        #expect(limits.admit(address: "a", appId: "other", now: 0) == .admitted)
    }

    @Test func debugGuessesAreLimitedPerAddress() {
        let limits = IssuerLimits(perSecond: 100, perAddress: 0)
        for _ in 0..<10 {
            #expect(limits.debugGuessAllowed(address: "a", now: 0))
            limits.debugGuessFailed(address: "a", now: 0)
        }
        #expect(!limits.debugGuessAllowed(address: "a", now: 0))
        #expect(limits.debugGuessAllowed(address: "b", now: 0), "another address is unaffected")
        #expect(!limits.debugGuessAllowed(address: "a", now: 5.9))
        #expect(limits.debugGuessAllowed(address: "a", now: 6.1), "one guess back after 6 s (10 a minute)")
    }

    @Test func bucketTableIsBoundedAndForgetsRefilledKeys() {
        let buckets = KeyedBuckets(rate: 1, burst: 2, capacity: 100)
        for i in 0..<100 { #expect(buckets.take("k\(i)", now: 0)) }
        #expect(buckets.trackedKeys == 100)
        #expect(buckets.take("new", now: 0), "an untracked key is held to the limits above only")
        #expect(buckets.trackedKeys == 100)
        // After the buckets refilled, a new key finds room: refilled ones are forgotten (they lose nothing).
        #expect(buckets.take("new", now: 5))
        #expect(buckets.trackedKeys == 1)
    }

    @Test func clientAddressKeys() {
        #expect(ClientAddressKey.key(ipBytes: [127, 0, 0, 2]) == "127.0.0.2")
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 0, 2, 1]
        #expect(ClientAddressKey.key(ipBytes: mapped) == "192.0.2.1")
        #expect(ClientAddressKey.key(text: "2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(ClientAddressKey.key(text: " 2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64",
                "one /64 is one client")
        #expect(ClientAddressKey.key(text: "[::1]") == "0:0:0:0::/64")
        #expect(ClientAddressKey.key(text: "203.0.113.9 ") == "203.0.113.9")
        #expect(ClientAddressKey.key(text: "not-an-ip") == nil)
        #expect(ClientAddressKey.key(text: "203.0.113.9:443") == nil)
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

/// Every status the gateway writes itself carries its standard reason phrase (issue 23: the issuer's answers said
/// `HTTP/1.1 200 Error` and `429 Error`).
@Suite struct ReasonPhraseTests {
    /// The gateway's own answers (docs/behaviour.md), the issuer's (IssuerError codes and 200), and the admin listener's.
    static let written = [200, 400, 401, 403, 404, 405, 408, 413, 414, 429, 431, 501, 502, 503, 504, 505]

    @Test func everyWrittenStatusHasItsPhrase() {
        let expected = [200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                        405: "Method Not Allowed", 408: "Request Timeout", 413: "Content Too Large",
                        414: "URI Too Long", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
                        501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
                        504: "Gateway Timeout", 505: "HTTP Version Not Supported"]
        for status in Self.written { #expect(ErrorResponse.reasonPhrase(status) == expected[status], "\(status)") }
        for code in [IssuerError.rateLimited, .bodyTooLarge, .permissionDenied("x"), .notFound("x", "y"),
                     .invalidArgument("x", "y"), .unavailable("x")].map(\.code) {
            #expect(Self.written.contains(code) && !ErrorResponse.reasonPhrase(code).isEmpty, "\(code)")
        }
    }

    @Test func noStatusGetsAMadeUpPhrase() {
        for status in 100...599 {
            let phrase = ErrorResponse.reasonPhrase(status)
            #expect(phrase != "Error", "\(status)")
            #expect(phrase.allSatisfy { $0.isASCII && ($0.isLetter || $0 == " " || $0 == "-") }, "\(status)")
        }
        #expect(ErrorResponse.reasonPhrase(299).isEmpty, "an unregistered status gets an empty phrase")
    }
}
