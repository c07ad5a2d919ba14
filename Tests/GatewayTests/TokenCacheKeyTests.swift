@testable import Gateway
@testable import ProxyCore
import ReplayStores
import Testing

/// The verified-token cache's key: NH with two random keys, then SipHash-128 of the sums and the length
/// (`TokenHash`); SipHash-128 alone past `TokenHash.maxBytes`.
@Suite struct TokenCacheKeyTests {
    /// The reference implementation's 128-bit vectors (SipHash-2-4, key 00 01 … 0f, message 00 01 … of length
    /// 0, 1, 7, 8 and 15): the same code with c = 1, d = 3 keys the cache.
    @Test func sipHash128MatchesTheReferenceVectors() {
        let key = (UInt64(0x0706_0504_0302_0100), UInt64(0x0f0e_0d0c_0b0a_0908))
        func digest(_ length: Int) -> [UInt8] {
            let message = (0..<length).map { UInt8($0) }
            let (a, b) = message.withUnsafeBytes {
                SipHash.hash128($0, key: key, compressionRounds: 2, finalizationRounds: 4)
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

    /// NH pads to 16 bytes with zeros: a token and the same token with a zero byte more fill the same blocks, and
    /// only the hashed length tells them apart. Equal text gives equal keys at every length, around block edges
    /// and across the limit where the whole-token SipHash takes over.
    @Test func zeroPaddingAndLengthsAreToldApart() {
        for n in [0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 900, 4095, 4096, 4097, 5000] {
            let token = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(TokenCache.Key(token: token) == TokenCache.Key(token: token), "length \(n)")
            #expect(TokenCache.Key(token: token + [0]) != TokenCache.Key(token: token), "length \(n)")
        }
    }

    /// A token of a realistic size (~900 bytes): a change of one bit in any byte, in any NH block and in the tail
    /// block, changes the key.
    @Test func keysDifferForALongTokenChangedAnywhere() {
        let token = (0..<905).map { UInt8(truncatingIfNeeded: 0x41 &+ $0 % 57) }
        let base = TokenCache.Key(token: token)
        for index in token.indices {
            var changed = token
            changed[index] ^= 0x20
            #expect(TokenCache.Key(token: changed) != base, "byte \(index)")
        }
    }
}
