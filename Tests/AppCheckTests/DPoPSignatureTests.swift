@testable import AppCheck
import COpenSSL
import Testing

/// The ECDSA half of DPoP proof verification (`DPoPPublicKey`): the JOSE R ‖ S → DER conversion written by hand
/// (checked against OpenSSL's own `ECDSA_SIG` encoding), the verification contexts kept with a key, a cached token's
/// `ath`, and the memo of judged headers (`DPoPHeaderMemo`). Keys and signatures are made by OpenSSL.
@Suite struct DPoPSignatureTests {
    /// OpenSSL's DER for R ‖ S: BN_bin2bn of each half into an ECDSA_SIG, then i2d_ECDSA_SIG.
    static func openSSLDER(_ raw: [UInt8]) throws -> [UInt8] {
        let size = raw.count / 2
        let sig = try #require(ECDSA_SIG_new())
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(size), nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + size }, Int32(size), nil) }
        try #require(ECDSA_SIG_set0(sig, try #require(r), try #require(s)) == 1)
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(sig, &out)
        let bytes = try #require(out)
        defer { CRYPTO_free(bytes, #fileID, #line) }
        try #require(length > 0)
        return Array(UnsafeBufferPointer(start: bytes, count: Int(length)))
    }

    static func handDER(_ raw: [UInt8], capacity: Int = DPoPPublicKey.maxDERSignatureLength) -> [UInt8]? {
        var out = [UInt8](repeating: 0xEE, count: capacity)
        let count = out.withUnsafeMutableBytes { o in raw.withUnsafeBytes { DPoPPublicKey.writeDERSignature(fromJOSE: $0, into: o) } }
        return count.map { Array(out[..<$0]) }
    }

    static func publicKey(_ key: DPoPPrivateKey) throws -> DPoPPublicKey {
        try DPoPPublicKey(jwk: try StrictJSON.parse(Array(key.publicJWKJSON.utf8)), algorithm: key.algorithm)
    }

    /// Many signatures OpenSSL made (P-256 and P-384, random messages): the hand-written DER equals OpenSSL's
    /// encoding of the same r and s, and the signature verifies. Over 1,500 signatures both halves often start with a
    /// set high bit (half of them) and now and then with a zero byte; the cases below pin those down exactly.
    @Test(arguments: [(DPoPPublicKey.Algorithm.es256, 1200), (.es384, 300)])
    func derEqualsOpenSSLsOnSignaturesOpenSSLMade(algorithm: DPoPPublicKey.Algorithm, count: Int) throws {
        let key = try #require(DPoPPrivateKey.generate(algorithm))
        let verifier = try Self.publicKey(key)
        var highBit = 0
        var generator = SystemRandomNumberGenerator()
        for i in 0..<count {
            let message = (0..<(1 + i % 90)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let raw = try #require(key.sign(message))
            #expect(raw.count == 2 * algorithm.curve.size)
            let ours = try #require(Self.handDER(raw))
            #expect(ours == (try Self.openSSLDER(raw)), "signature \(i)")
            if raw[0] & 0x80 != 0 || raw[raw.count / 2] & 0x80 != 0 { highBit += 1 }
            let ok = message.withUnsafeBytes { verifier.verify(signingInput: $0, signature: raw) }
            #expect(ok, "signature \(i) does not verify")
        }
        #expect(highBit > count / 2)
    }

    /// Edge cases of the INTEGER encoding, each against OpenSSL's: leading zero bytes (dropped), a high bit after
    /// them or at the start (a 0x00 put in front), zero (one 0x00 byte), all ones, P-384's size.
    @Test func derEdgeCasesEqualOpenSSLs() throws {
        func half(_ prefix: [UInt8], size: Int, fill: UInt8) -> [UInt8] { prefix + Array(repeating: fill, count: size - prefix.count) }
        var cases: [[UInt8]] = []
        for size in [32, 48] {
            let shapes: [[UInt8]] = [
                half([], size: size, fill: 0),                 // zero
                half([0x00], size: size, fill: 0x11),          // one leading zero
                half([0x00, 0x00, 0x00], size: size, fill: 0x7F),
                half([0x00, 0x80], size: size, fill: 0x01),    // leading zero, then the high bit
                half([0x00, 0x00, 0xFF], size: size, fill: 0xFF),
                half([0x80], size: size, fill: 0x00),          // high bit first
                half([], size: size, fill: 0xFF),
                half([0x7F], size: size, fill: 0xFF),
                half(Array(repeating: 0, count: size - 1) + [0x01], size: size, fill: 0),   // 1
                half(Array(repeating: 0, count: size - 1) + [0x80], size: size, fill: 0),   // 0x80 alone: 00 80
            ]
            for r in shapes { for s in shapes { cases.append(r + s) } }
        }
        for raw in cases {
            #expect(Self.handDER(raw) == (try Self.openSSLDER(raw)), "\(raw)")
        }
        // Zero is the one-byte INTEGER 0: 30 06 02 01 00 02 01 00.
        #expect(Self.handDER([UInt8](repeating: 0, count: 64)) == [0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00])
        // The longest, P-384 with both high bits set, is exactly maxDERSignatureLength.
        #expect(Self.handDER([UInt8](repeating: 0xFF, count: 96))?.count == DPoPPublicKey.maxDERSignatureLength)
    }

    /// What the writer refuses: odd or empty input, halves over 48 bytes, an output buffer too small.
    @Test func derRefusesWhatItCannotWrite() {
        #expect(Self.handDER([]) == nil)
        #expect(Self.handDER([UInt8](repeating: 1, count: 63)) == nil)
        #expect(Self.handDER([UInt8](repeating: 1, count: 98)) == nil)
        #expect(Self.handDER([UInt8](repeating: 0xFF, count: 64), capacity: 71) == nil)
        #expect(Self.handDER([UInt8](repeating: 0xFF, count: 64), capacity: 72)?.count == 72)
    }

    /// One key verifies one signature after another on its kept contexts, a failure in between (a tampered signature,
    /// a signature over other bytes, a high-S twin that is still valid ECDSA) leaving later results right.
    @Test(arguments: [DPoPPublicKey.Algorithm.es256, .es384, .edDSA])
    func keptContextsGiveTheRightAnswerEveryTime(algorithm: DPoPPublicKey.Algorithm) throws {
        let key = try #require(DPoPPrivateKey.generate(algorithm))
        let verifier = try Self.publicKey(key)
        for i in 0..<40 {
            let message = Array("message \(i)".utf8)
            var raw = try #require(key.sign(message))
            #expect(message.withUnsafeBytes { verifier.verify(signingInput: $0, signature: raw) })
            let other = Array("message \(i + 1)".utf8)
            #expect(!other.withUnsafeBytes { verifier.verify(signingInput: $0, signature: raw) })
            raw[i % raw.count] ^= 0x01
            #expect(!message.withUnsafeBytes { verifier.verify(signingInput: $0, signature: raw) })
            #expect(!message.withUnsafeBytes { verifier.verify(signingInput: $0, signature: Array(raw.dropLast())) })
        }
    }

    /// A cached token's `ath` given as `accessTokenHash` (no token bytes) is checked like one hashed from the token.
    @Test func accessTokenHashTakesThePlaceOfTheToken() throws {
        let key = try #require(DPoPPrivateKey.generate(.es256))
        let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
        let proof = Array(try #require(key.proof(htm: "GET", htu: "https://a.example/p", iat: 1_800_000_000, jti: "j",
                                                 accessToken: token)).utf8)
        func request(_ hash: String?, token: [UInt8]?) -> DPoPRequest {
            DPoPRequest(method: "GET", scheme: "https", authority: "a.example", path: "/p", accessToken: token,
                        thumbprint: key.thumbprint, clockSkew: 5, accessTokenHash: hash)
        }
        let ath = DPoPRequest.ath(of: Array(token.utf8))
        #expect(ath == Base64URL.encode(SHA256Digest.hash(Array(token.utf8))))
        #expect((try? DPoPVerifier.verify(proof, request: request(ath, token: nil), now: 1_800_000_000).get()) != nil)
        let other = DPoPRequest.ath(of: Array((token + "x").utf8))
        guard case .failure(let rule) = DPoPVerifier.verify(proof, request: request(other, token: nil), now: 1_800_000_000) else {
            Issue.record("a proof for another token's ath passed"); return
        }
        #expect(rule == .ath)
        // The given hash wins over the token bytes (it was computed from them when the token was cached).
        guard case .failure(let rule2) = DPoPVerifier.verify(proof, request: request(other, token: Array(token.utf8)),
                                                             now: 1_800_000_000) else {
            Issue.record("accessTokenHash was not used"); return
        }
        #expect(rule2 == .ath)
    }

    /// The header memo: a header judged once gives its key again for the next proof with the same header bytes, and
    /// still every other rule runs (signature, malformed payload); headers that failed are never remembered.
    @Test func headerMemoKeepsEveryOtherRule() throws {
        let key = try #require(DPoPPrivateKey.generate(.es256))
        let request = DPoPRequest(method: "GET", scheme: "https", authority: "a.example", path: "/p", accessToken: nil,
                                  thumbprint: key.thumbprint, clockSkew: 5)
        let now = 1_800_000_000.0
        func rule(_ proof: String) -> DPoPRule? {
            if case .failure(let rule) = DPoPVerifier.verify(Array(proof.utf8), request: request, now: now) { return rule }
            return nil
        }
        let first = try #require(key.proof(htm: "GET", htu: "https://a.example/p", iat: now, jti: "1"))
        let second = try #require(key.proof(htm: "GET", htu: "https://a.example/p", iat: now, jti: "2"))
        #expect(rule(first) == nil)
        let headerPart = Array(first.utf8.prefix(while: { $0 != UInt8(ascii: ".") }))
        #expect(DPoPHeaderMemo.lookup(headerPart[...]) != nil)
        #expect(rule(second) == nil)
        // The same header, a signature from another key: refused.
        let parts = second.split(separator: ".", omittingEmptySubsequences: false)
        let thief = try #require(DPoPPrivateKey.generate(.es256))
        let forged = try #require(thief.sign(Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(rule("\(parts[0]).\(parts[1]).\(Base64URL.encode(forged))") == .signature)
        // The same header, a payload that is not JSON: malformed, as before the memo.
        #expect(rule("\(parts[0]).\(Base64URL.encode(Array("{".utf8))).\(parts[2])") == .malformed)
        #expect(rule("\(parts[0]).\(parts[1]).\(parts[2])=") == .malformed)
        // A header failing its rules is not remembered and fails each time.
        let badHeader = try #require(key.sign(headerJSON: "{\"typ\":\"jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}",
                                              payloadJSON: "{\"jti\":\"3\",\"htm\":\"GET\",\"htu\":\"https://a.example/p\",\"iat\":\(Int(now))}"))
        #expect(rule(badHeader) == .typ)
        #expect(rule(badHeader) == .typ)
        #expect(DPoPHeaderMemo.lookup(Array(badHeader.utf8.prefix(while: { $0 != UInt8(ascii: ".") }))[...]) == nil)
    }

    /// The memo is a bounded cache looked up by a hash and then the exact bytes: a part that differs in one byte, a
    /// prefix or a longer part is not the one remembered; a part over `maxPartLength` is never kept; after twice
    /// `limit` other parts, the memo holds at most `limit` of them and a look-up still answers only for exact bytes.
    @Test func headerMemoMatchesExactBytesAndStaysBounded() throws {
        let key = try DPoPPublicKey(jwk: try StrictJSON.parse(Array(try #require(DPoPPrivateKey.generate(.es256)).publicJWKJSON.utf8)),
                                    algorithm: .es256)
        let part = Array("eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIn19-memo-test".utf8)
        DPoPHeaderMemo.remember(part[...], key)
        #expect(DPoPHeaderMemo.lookup(part[...])?.thumbprint == key.thumbprint)
        for i in part.indices {
            var changed = part
            changed[i] ^= 0x01
            #expect(DPoPHeaderMemo.lookup(changed[...]) == nil, "byte \(i) changed")
        }
        #expect(DPoPHeaderMemo.lookup(part.dropLast()) == nil)
        #expect(DPoPHeaderMemo.lookup((part + [0x41])[...]) == nil)
        #expect(DPoPHeaderMemo.lookup([][...]) == nil)
        let long = [UInt8](repeating: 0x41, count: DPoPHeaderMemo.maxPartLength + 1)
        DPoPHeaderMemo.remember(long[...], key)
        #expect(DPoPHeaderMemo.lookup(long[...]) == nil)
        // Twice `limit` parts: at most `limit` are found afterwards, each only by its own bytes.
        let many = (0..<(2 * DPoPHeaderMemo.limit)).map { Array("memo-part-\($0)".utf8) }
        for part in many { DPoPHeaderMemo.remember(part[...], key) }
        let kept = many.filter { DPoPHeaderMemo.lookup($0[...]) != nil }.count
        #expect(kept <= DPoPHeaderMemo.limit)
        #expect(kept >= DPoPHeaderMemo.limit / 4, "most slots hold a part: the hash spreads them")
        #expect(DPoPHeaderMemo.lookup(Array("memo-part-\(2 * DPoPHeaderMemo.limit)".utf8)[...]) == nil)
    }
}
