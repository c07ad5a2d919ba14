import Testing
@testable import AppCheck

/// `TokenClaims.claimIndex` switches on packed member names: its constants must be exactly `claimNames`.
@Suite struct TokenClaimsIndexTests {
    @Test func everyClaimNameFindsItsIndexAndNothingElseMatches() throws {
        for (index, name) in TokenClaims.claimNames.enumerated() {
            let key = try #require(JSONValue.ShortKey(name))
            #expect(TokenClaims.claimIndex(key) == index, "\(name)")
        }
        for other in ["", "is", "isss", "ISS", "aub", "providers", "provide", "sub\u{0}", "exq", "kid", "alg", "ris", "risks", "Risk"] {
            if let key = JSONValue.ShortKey(other) { #expect(TokenClaims.claimIndex(key) == nil, "\(other)") }
        }
        #expect(JSONValue.ShortKey("123456789") == nil)
    }
}
