@testable import Gateway
import Testing

/// The verified-token cache's key: SipHash-128, one pass over the token.
@Suite struct TokenCacheKeyTests {
    /// The reference implementation's 128-bit vectors (SipHash-2-4, key 00 01 … 0f, message 00 01 … of length
    /// 0, 1, 7, 8 and 15): the same code with c = 1, d = 3 keys the cache.
    @Test func sipHash128MatchesTheReferenceVectors() {
        let key = (UInt64(0x0706_0504_0302_0100), UInt64(0x0f0e_0d0c_0b0a_0908))
        func digest(_ length: Int) -> [UInt8] {
            let message = (0..<length).map { UInt8($0) }
            let (a, b) = message.withUnsafeBytes {
                SipHash128.hash($0, key: key, compressionRounds: 2, finalizationRounds: 4)
            }
            return (0..<8).map { UInt8(truncatingIfNeeded: a >> (8 * $0)) }
                + (0..<8).map { UInt8(truncatingIfNeeded: b >> (8 * $0)) }
        }
        #expect(digest(0) == [0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93])
    }

    @Test func keysDifferForTokensThatDifferInOneByteAnywhere() {
        let token = Array("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl-tail".utf8)
        let base = TokenCache.Key(token: token)
        #expect(TokenCache.Key(token: token) == base)
        for index in token.indices {
            var changed = token
            changed[index] ^= 0x01
            #expect(TokenCache.Key(token: changed) != base, "byte \(index)")
        }
        #expect(TokenCache.Key(token: token + [0x41]) != base)
        #expect(TokenCache.Key(token: Array(token.dropLast())) != base)
    }
}
