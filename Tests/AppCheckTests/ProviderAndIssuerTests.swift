import Testing
@testable import AppCheck

/// docs/behaviour.md step 6 (the issuer of the key set) and step 7 (`providers`).
@Suite struct ProviderAndIssuerTests {
    @Test func aTokenIsCheckedAgainstTheIssuerOfItsKeySet() throws {
        let own = Fixtures.policy.withIssuer("https://api.example.com/appcheck/\(Fixtures.projectNumber)")
        // A Firebase-shaped token verified under the own issuer's rules is wrong_issuer, and vice versa.
        #expect(Fixtures.reason(try Fixtures.verify(payloadJSON: Fixtures.claims([:]), now: Fixtures.now, policy: own)) == .wrongIssuer)
        let ownClaims = Fixtures.claims(["iss": "\"https://api.example.com/appcheck/\(Fixtures.projectNumber)\""])
        #expect(Fixtures.reason(try Fixtures.verify(payloadJSON: ownClaims, now: Fixtures.now, policy: own)) == nil)
        #expect(Fixtures.reason(try Fixtures.verify(payloadJSON: ownClaims, now: Fixtures.now, policy: Fixtures.policy)) == .wrongIssuer)
        #expect(own.requiredAudiences == Fixtures.policy.requiredAudiences)
    }

    @Test func providerClaimIsParsedAndChecked() throws {
        let withProvider = try Fixtures.verify(payloadJSON: Fixtures.claims([:], adding: [("provider", "\"app_attest\"")]),
                                               now: Fixtures.now, policy: Fixtures.policy).get()
        #expect(withProvider.provider == "app_attest")
        #expect(AppCheckVerifier.checkProvider(withProvider, allowed: ["app_attest"]) == nil)
        #expect(AppCheckVerifier.checkProvider(withProvider, allowed: ["debug"]) == .providerNotAllowed)
        #expect(AppCheckVerifier.checkProvider(withProvider, allowed: []) == nil)

        let firebase = try Fixtures.verify(payloadJSON: Fixtures.claims([:]), now: Fixtures.now, policy: Fixtures.policy).get()
        #expect(firebase.provider == nil)
        #expect(AppCheckVerifier.checkProvider(firebase, allowed: ["app_attest"]) == .providerNotAllowed)
        #expect(AppCheckVerifier.checkProvider(firebase, allowed: ["unspecified"]) == nil)

        for bad in ["5", "\"\"", "null", "[\"debug\"]"] {
            let claims = Fixtures.claims([:], adding: [("provider", bad)])
            #expect(Fixtures.reason(try Fixtures.verify(payloadJSON: claims, now: Fixtures.now, policy: Fixtures.policy)) == .malformed, "\(bad)")
        }
    }

    /// `max_risk` on a route (docs/behaviour.md step 7): the `risk` claim at most N passes, above is `risk_exceeded`;
    /// absent passes unless `require_risk` (`risk_unknown`); not a whole number ≥ 0 is `malformed` there only.
    @Test func riskClaimIsParsedAndChecked() throws {
        func verified(_ risk: String?) throws -> VerifiedClaims {
            try Fixtures.verify(payloadJSON: Fixtures.claims([:], adding: risk.map { [("risk", $0)] } ?? []),
                                now: Fixtures.now, policy: Fixtures.policy).get()
        }
        let three = try verified("3")
        #expect(three.risk == .value(3))
        #expect(AppCheckVerifier.checkRisk(three, maxRisk: 3, requireRisk: true) == nil)
        #expect(AppCheckVerifier.checkRisk(three, maxRisk: 2, requireRisk: false) == .riskExceeded)
        #expect(AppCheckVerifier.checkRisk(three, maxRisk: nil, requireRisk: false) == nil)
        let none = try verified(nil)
        #expect(none.risk == .absent)
        #expect(AppCheckVerifier.checkRisk(none, maxRisk: 2, requireRisk: false) == nil)
        #expect(AppCheckVerifier.checkRisk(none, maxRisk: 2, requireRisk: true) == .riskUnknown)
        #expect(try verified("0").risk == .value(0))
        for bad in ["-1", "2.5", "\"2\"", "null", "[1]", "1e300"] {
            let claims = try verified(bad)
            #expect(claims.risk == .invalid, "\(bad)")
            #expect(AppCheckVerifier.checkRisk(claims, maxRisk: 100, requireRisk: false) == .malformed, "\(bad)")
            #expect(AppCheckVerifier.checkRisk(claims, maxRisk: nil, requireRisk: false) == nil, "ignored without max_risk")
        }
    }
}
