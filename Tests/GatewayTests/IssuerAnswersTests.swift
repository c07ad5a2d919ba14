import Foundation
import Testing
import TestSupport

/// What a user trips on in the issuer's and the gateway's own answers (issue 39), through a real gateway: JSON error
/// bodies end with a newline, a refused exchange says the same neutral words for every method, every 429 carries
/// `Retry-After`, and the issuer's access-log lines carry no `verifications` (no token is expected there) while an API
/// request's line still does.
@Suite struct IssuerAnswersTests {
    @Test func errorBodiesRetryAfterAndIssuerLogLines() throws {
        let rig = try IssuerEndToEndTests.Rig(maxPerSecond: 1)
        defer { rig.stop() }

        // The gateway's own JSON error, and the issuer's.
        let missing = try RawHTTPClient.roundTrip(port: rig.gateway.port, "GET /attested/x HTTP/1.1\r\nHost: gw\r\n\r\n")
        #expect(missing.status == 401 && missing.bodyText.hasPrefix("{\"error\":\"app_check_token_missing\"")
                && missing.bodyText.hasSuffix("}\n"), "\(missing.bodyText)")
        let wrong = try rig.post("exchangeDebugToken", #"{"debug_token":"wrong-secret-0123456789"}"#)
        #expect(wrong.status == 403)
        #expect(wrong.bodyText == #"{"error":{"code":403,"message":"The exchange was refused.","status":"PERMISSION_DENIED"}}"# + "\n")
        #expect(wrong.header("Retry-After") == nil, "no Retry-After on a 403")

        // Past the process ceiling (1 a second, burst 1): 429 with Retry-After 1.
        var limited: TestResponse?
        for _ in 0..<5 {
            let r = try rig.post("generateAppAttestChallenge", "")
            if r.status == 429 { limited = r; break }
        }
        let tooMany = try #require(limited, "no 429 past max_exchanges_per_second: 1")
        #expect(tooMany.header("Retry-After") == "1", "\(tooMany.bodyText)")
        #expect(tooMany.bodyText.hasSuffix("}\n") && tooMany.bodyText.contains("RESOURCE_EXHAUSTED"), "\(tooMany.bodyText)")

        // The access log: the issuer's lines have no verdict on a token; an API request's has one.
        #expect(rig.gateway.logged(#""status":401"#))
        let lines = rig.gateway.logLines().filter { $0.contains(#""message":"request""#) }
        let issuerLines = lines.filter { $0.contains(#""route":"issuer""#) }
        #expect(!issuerLines.isEmpty && issuerLines.allSatisfy { !$0.contains("verifications") }, "\(issuerLines)")
        let api = lines.first { $0.contains(#""route":"attested""#) } ?? ""
        #expect(api.contains(#""verifications":{"app":"MISSING"}"#), "\(api)")
    }

    /// Failed debug guesses are counted per minute: their 429 says to come back in a minute.
    @Test func debugGuessesExhaustedSaysAMinute() throws {
        let rig = try IssuerEndToEndTests.Rig()
        defer { rig.stop() }
        var last: TestResponse?
        for _ in 0..<12 {
            last = try rig.post("exchangeDebugToken", #"{"debug_token":"wrong-secret-0123456789"}"#)
            if last?.status == 429 { break }
        }
        let r = try #require(last)
        #expect(r.status == 429 && r.header("Retry-After") == "60", "\(r.status) \(r.bodyText)")
    }
}
