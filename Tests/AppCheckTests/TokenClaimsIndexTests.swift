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

    /// A member name packed in place (one eight-byte load when eight bytes can be read) is the key packed byte by byte,
    /// for every length and every position up to the buffer's end.
    @Test func keysPackedInPlaceAreTheKeysPackedByteByByte() {
        let bytes: [UInt8] = Array("iss\"aud\"provider\"risk\"x".utf8)
        bytes.withUnsafeBufferPointer { buffer in
            for start in 0...bytes.count {
                for end in start...min(bytes.count, start + 10) {
                    let inPlace = JSONValue.ShortKey(in: buffer, from: start, to: end)
                    let byByte = JSONValue.ShortKey(utf8: UnsafeBufferPointer(rebasing: buffer[start..<end]))
                    #expect(inPlace == byByte, "\(start)..<\(end)")
                }
            }
        }
    }
}
