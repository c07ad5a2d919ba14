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
}
