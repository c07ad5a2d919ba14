@testable import AppCheck
import Testing

/// SPEC §4.4 / RFC 9449 §4.3: each rule refused on its own, with keys made by OpenSSL here, and RFC 9449's own
/// example proof and thumbprint as vectors.
@Suite struct DPoPVerifierTests {
    static let now = 1_800_000_000.0
    static let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"

    /// The request every proof below is made for, bound to `key`.
    static func request(_ key: DPoPPrivateKey, method: String = "GET", scheme: String = "https",
                        authority: String = "api.example.com", path: String = "/v1/items") -> DPoPRequest {
        DPoPRequest(method: method, scheme: scheme, authority: authority, path: path,
                    accessToken: Array(token.utf8), thumbprint: key.thumbprint, maxAge: 60, clockSkew: 5)
    }

    static func key(_ algorithm: DPoPPublicKey.Algorithm = .es256) throws -> DPoPPrivateKey {
        try #require(DPoPPrivateKey.generate(algorithm))
    }

    static func proof(_ key: DPoPPrivateKey, htm: String = "GET", htu: String = "https://api.example.com/v1/items",
                      iat: Double = now, jti: String = "j-1", token: String? = DPoPVerifierTests.token) throws -> String {
        try #require(key.proof(htm: htm, htu: htu, iat: iat, jti: jti, accessToken: token))
    }

    func rule(_ proof: String, _ request: DPoPRequest, now: Double = Self.now) -> DPoPRule? {
        if case .failure(let rule) = DPoPVerifier.verify(Array(proof.utf8), request: request, now: now) { return rule }
        return nil
    }

    // MARK: RFC 9449 vectors

    /// RFC 9449 §4.1's example proof verifies for its request (POST https://server.example.com/token) at its `iat`,
    /// and its key's thumbprint is the `jkt` of RFC 9449 §6.1's example.
    @Test func rfc9449ExampleProof() throws {
        let proof = "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19.eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ.2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"
        let request = DPoPRequest(method: "POST", scheme: "https", authority: "server.example.com", path: "/token",
                                  accessToken: nil, thumbprint: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I",
                                  clockSkew: 0)
        let verified = try DPoPVerifier.verify(Array(proof.utf8), request: request, now: 1_562_262_616).get()
        #expect(verified.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        #expect(verified.jti == "-BwC3ESc6acc2lTc")
        #expect(rule(proof, request, now: 1_562_262_616 + 61) == .iat)
        var otherPath = request
        otherPath.path = "/token2"
        #expect(rule(proof, otherPath, now: 1_562_262_616) == .htu)
    }

    /// RFC 9449 §7.1's `ath` example: base64url(SHA-256) of its access token.
    @Test func rfc9449ExampleAth() {
        let ath = Base64URL.encode(SHA256Digest.hash(Array("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU".utf8)))
        #expect(ath == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    /// RFC 8037 Appendix A.3: the thumbprint of its Ed25519 example key.
    @Test func rfc8037Ed25519Thumbprint() throws {
        let jwk: JSONValue = .object([("kty", .string("OKP")), ("crv", .string("Ed25519")),
                                      ("x", .string("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"))])
        #expect(try DPoPPublicKey(jwk: jwk, algorithm: .edDSA).thumbprint == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k")
    }

    // MARK: what passes

    @Test(arguments: DPoPPublicKey.Algorithm.allCases)
    func eachAlgorithmPasses(_ algorithm: DPoPPublicKey.Algorithm) throws {
        let key = try Self.key(algorithm)
        let verified = try DPoPVerifier.verify(Array(try Self.proof(key).utf8), request: Self.request(key), now: Self.now).get()
        #expect(verified.thumbprint == key.thumbprint)
        #expect(verified.jti == "j-1")
        #expect(verified.rememberUntil == Self.now + 65)
    }

    @Test func htuComparesSchemeAndHostCaselesslyAndIgnoresDefaultPort() throws {
        let key = try Self.key()
        #expect(rule(try Self.proof(key, htu: "HTTPS://API.example.com:443/v1/items"), Self.request(key)) == nil)
        #expect(rule(try Self.proof(key, htu: "https://api.example.com/v1/items"),
                     Self.request(key, authority: "api.example.com:443")) == nil)
        #expect(rule(try Self.proof(key, htu: "http://127.0.0.1:8080/"), Self.request(key, scheme: "http",
                     authority: "127.0.0.1:8080", path: "/")) == nil)
        #expect(rule(try Self.proof(key, htu: "http://127.0.0.1:8080"), Self.request(key, scheme: "http",
                     authority: "127.0.0.1:8080", path: "/")) == nil)
    }

    @Test func replayKeysAreTheirOwnDomainAndPerKey() throws {
        let a = try Self.key(), b = try Self.key()
        let va = try DPoPVerifier.verify(Array(try Self.proof(a).utf8), request: Self.request(a), now: Self.now).get()
        let vb = try DPoPVerifier.verify(Array(try Self.proof(b).utf8), request: Self.request(b), now: Self.now).get()
        #expect(va.jti == vb.jti)
        #expect(va.replayKey != vb.replayKey)
        // Never the key a token with the same jti would have (SHA-256(sub + "\n" + jti)).
        #expect(va.replayKey != TokenClaims.jtiReplayKey(sub: "dpop", jti: "j-1"))
    }

    /// The replay key's material: 0x01, the thumbprint's 32 bytes, the jti (one SHA-256 block for a jti of up to 22
    /// bytes); a thumbprint that is not 43 base64url characters keeps the 0x00 "dpop\n" layout. Keys differ per
    /// thumbprint and per jti, including a jti that is another's with a byte moved across the boundary.
    @Test func replayKeyLayout() throws {
        let key = try Self.key()
        let raw = try #require(Base64URL.decode(key.thumbprint))
        #expect(raw.count == 32)
        for jti in ["j-1", String(repeating: "x", count: 22), String(repeating: "y", count: 23), "\u{E9}t\u{E9}"] {
            let proof = DPoPVerifiedProof(thumbprint: key.thumbprint, jti: jti, issuedAt: Self.now, rememberUntil: Self.now)
            #expect(proof.replayKey.bytes == SHA256Digest.hash([0x01] + raw + Array(jti.utf8)), "\(jti)")
        }
        let odd = DPoPVerifiedProof(thumbprint: "not-a-thumbprint", jti: "j", issuedAt: Self.now, rememberUntil: Self.now)
        #expect(odd.replayKey.bytes == SHA256Digest.hash([0x00] + Array("dpop\nnot-a-thumbprint\nj".utf8)))
        let other = try Self.key()
        let keys = Set([(key.thumbprint, "a"), (key.thumbprint, "b"), (other.thumbprint, "a"), (key.thumbprint, "ab"),
                        (key.thumbprint, "")].map {
            DPoPVerifiedProof(thumbprint: $0.0, jti: $0.1, issuedAt: Self.now, rememberUntil: Self.now).replayKey
        })
        #expect(keys.count == 5)
    }

    /// A proof handed over as a slice of a larger buffer (as the gateway hands the `DPoP` field's value, in place):
    /// the same verdicts as the proof on its own, the signature checked over the slice's own bytes.
    @Test func proofInASliceOfALargerBuffer() throws {
        let key = try Self.key()
        let proof = Array(try Self.proof(key).utf8)
        let buffer = Array("DPoP: ".utf8) + proof + Array("\r\nHost: x\r\n".utf8)
        let slice = buffer[6..<(6 + proof.count)]
        #expect(slice.startIndex == 6)
        let verified = try DPoPVerifier.verify(slice, request: Self.request(key), now: Self.now).get()
        #expect(verified.jti == "j-1")
        var changed = buffer
        changed[6 + proof.count - 3] ^= 0x01  // in the signature
        guard case .failure(let rule) = DPoPVerifier.verify(changed[6..<(6 + proof.count)], request: Self.request(key),
                                                            now: Self.now) else {
            Issue.record("a changed signature passed")
            return
        }
        #expect(rule == .signature || rule == .malformed)
        // One byte more on either side is not the proof.
        #expect((try? DPoPVerifier.verify(buffer[5..<(6 + proof.count)], request: Self.request(key), now: Self.now).get()) == nil)
        #expect((try? DPoPVerifier.verify(buffer[6..<(7 + proof.count)], request: Self.request(key), now: Self.now).get()) == nil)
    }

    // MARK: each rule on its own

    @Test func malformed() throws {
        let key = try Self.key()
        let good = try Self.proof(key)
        #expect(rule("", Self.request(key)) == .malformed)
        #expect(rule(good + ".x", Self.request(key)) == .malformed)
        #expect(rule(good + "=", Self.request(key)) == .malformed)
        #expect(rule(String(repeating: "a", count: DPoPProof.maxLength + 1), Self.request(key)) == .malformed)
        let crit = try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"crit\":[\"x\"],\"jwk\":\(key.publicJWKJSON)}",
                                         payloadJSON: "{}"))
        #expect(rule(crit, Self.request(key)) == .malformed)
    }

    @Test func typ() throws {
        let key = try Self.key()
        for typ in [nil, "JWT", "DPoP+JWT", "dpop+jwt "] {
            let member = typ.map { "\"typ\":\"\($0)\"," } ?? ""
            let proof = try #require(key.sign(headerJSON: "{\(member)\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}",
                                              payloadJSON: "{\"jti\":\"a\",\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\(Int(Self.now))}"))
            #expect(rule(proof, Self.request(key)) == .typ, "typ \(String(describing: typ))")
        }
    }

    @Test func alg() throws {
        let key = try Self.key()
        let payload = "{\"jti\":\"a\",\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\(Int(Self.now))}"
        for alg in ["none", "HS256", "RS256", "PS256", "ES512", "es256", "Ed25519"] {
            let proof = try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"\(alg)\",\"jwk\":\(key.publicJWKJSON)}",
                                              payloadJSON: payload))
            #expect(rule(proof, Self.request(key)) == .alg, "alg \(alg)")
        }
        // alg none with an empty signature, as an attacker would send it.
        let unsigned = Base64URL.encode(Array("{\"typ\":\"dpop+jwt\",\"alg\":\"none\",\"jwk\":\(key.publicJWKJSON)}".utf8)) + "."
            + Base64URL.encode(Array(payload.utf8)) + "."
        #expect(rule(unsigned, Self.request(key)) == .alg)
    }

    @Test func jwk() throws {
        let key = try Self.key()
        let p384 = try Self.key(.es384)
        let ed = try Self.key(.edDSA)
        let jwk = key.publicJWK
        let x = jwk[2].1, y = jwk[3].1
        let payload = "{\"jti\":\"a\",\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\(Int(Self.now))}"
        let bad = [
            "",                                                                      // no jwk
            ",\"jwk\":\"\(x)\"",                                                     // not an object
            ",\"jwk\":{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"\(x)\",\"y\":\"\(y)\",\"d\":\"AAAA\"}",  // private member
            ",\"jwk\":{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"\(x)\",\"y\":\"\(y)\"}",  // curve does not fit ES256
            ",\"jwk\":{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"\(x)\"}",              // no y
            ",\"jwk\":{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"\(x)\",\"y\":\"\(x)\"}",  // not on the curve
            ",\"jwk\":{\"kty\":\"RSA\",\"n\":\"\(x)\",\"e\":\"AQAB\"}",                // RSA
            ",\"jwk\":\(p384.publicJWKJSON)",                                        // a P-384 key for ES256
            ",\"jwk\":\(ed.publicJWKJSON)",                                          // an OKP key for ES256
            ",\"jwk\":{\"kty\":\"oct\",\"k\":\"AAAA\"}",                               // a symmetric key
        ]
        for member in bad {
            let proof = try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\"\(member)}", payloadJSON: payload))
            #expect(rule(proof, Self.request(key)) == .jwk, "\(member)")
        }
        // An Ed25519 key with a private member.
        let edJWK = ed.publicJWK
        let edPrivate = try #require(ed.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"EdDSA\",\"jwk\":{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"\(edJWK[2].1)\",\"d\":\"\(edJWK[2].1)\"}}", payloadJSON: payload))
        #expect(rule(edPrivate, Self.request(ed)) == .jwk)
    }

    @Test func thumbprint() throws {
        let key = try Self.key(), other = try Self.key()
        #expect(rule(try Self.proof(other), Self.request(key)) == .thumbprint)
    }

    @Test func signature() throws {
        let key = try Self.key(), other = try Self.key()
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}"
        let payload = "{\"jti\":\"a\",\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\(Int(Self.now))}"
        // Signed by another key than the one it names.
        let forged = try #require(other.sign(headerJSON: header, payloadJSON: payload))
        #expect(rule(forged, Self.request(key)) == .signature)
        // A payload changed after signing.
        let good = try Self.proof(key)
        let parts = good.split(separator: ".").map(String.init)
        let changed = parts[0] + "." + Base64URL.encode(Array(payload.utf8)) + "." + parts[2]
        #expect(rule(changed, Self.request(key)) == .signature)
        // Wrong signature length.
        #expect(rule(parts[0] + "." + parts[1] + "." + Base64URL.encode([1, 2, 3]), Self.request(key)) == .signature)
    }

    @Test func htm() throws {
        let key = try Self.key()
        #expect(rule(try Self.proof(key, htm: "POST"), Self.request(key)) == .htm)
        #expect(rule(try Self.proof(key, htm: "get"), Self.request(key)) == .htm)
    }

    @Test func htu() throws {
        let key = try Self.key()
        for htu in ["https://api.example.com/v1/items?x=1", "https://api.example.com/v1/items#f", "https://other.example.com/v1/items",
                    "http://api.example.com/v1/items", "https://api.example.com/v1/items/", "https://api.example.com:8443/v1/items",
                    "https://u@api.example.com/v1/items", "api.example.com/v1/items", "/v1/items", "https://api.example.com/V1/items"] {
            #expect(rule(try Self.proof(key, htu: htu), Self.request(key)) == .htu, "\(htu)")
        }
    }

    @Test func iat() throws {
        let key = try Self.key()
        #expect(rule(try Self.proof(key, iat: Self.now - 66), Self.request(key)) == .iat)   // stale
        #expect(rule(try Self.proof(key, iat: Self.now + 6), Self.request(key)) == .iat)    // future
        #expect(rule(try Self.proof(key, iat: Self.now - 65), Self.request(key)) == nil)    // edges pass
        #expect(rule(try Self.proof(key, iat: Self.now + 5), Self.request(key)) == nil)
        let noIat = try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}",
                                          payloadJSON: "{\"jti\":\"a\",\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\"\(Int(Self.now))\"}"))
        #expect(rule(noIat, Self.request(key)) == .iat)
    }

    @Test func ath() throws {
        let key = try Self.key()
        #expect(rule(try Self.proof(key, token: nil), Self.request(key)) == .ath)           // missing
        #expect(rule(try Self.proof(key, token: "another.token.x"), Self.request(key)) == .ath)  // another token's
        // At the issuer's exchange (no token) no ath is needed.
        var exchange = Self.request(key)
        exchange.accessToken = nil
        exchange.thumbprint = nil
        #expect(rule(try Self.proof(key, token: nil), exchange) == nil)
    }

    @Test func jti() throws {
        let key = try Self.key()
        #expect(rule(try Self.proof(key, jti: ""), Self.request(key)) == .jti)
        #expect(rule(try Self.proof(key, jti: String(repeating: "é", count: 129)), Self.request(key)) == .jti)
        #expect(rule(try Self.proof(key, jti: String(repeating: "é", count: 128)), Self.request(key)) == nil)
        let numeric = try #require(key.sign(headerJSON: "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(key.publicJWKJSON)}",
                                            payloadJSON: "{\"jti\":7,\"htm\":\"GET\",\"htu\":\"https://api.example.com/v1/items\",\"iat\":\(Int(Self.now)),\"ath\":\"\(Base64URL.encode(SHA256Digest.hash(Array(Self.token.utf8))))\"}"))
        #expect(rule(numeric, Self.request(key)) == .jti)
    }

    /// The order of SPEC §4.4: a proof wrong in every claim reports the first rule.
    @Test func firstFailureWins() throws {
        let key = try Self.key(), other = try Self.key()
        let everythingWrong = try Self.proof(other, htm: "PUT", htu: "http://x/?q", iat: 0, jti: "", token: nil)
        #expect(rule(everythingWrong, Self.request(key)) == .thumbprint)
        #expect(rule(try Self.proof(key, htm: "PUT", htu: "http://x/?q", iat: 0, jti: "", token: nil), Self.request(key)) == .htm)
        #expect(rule(try Self.proof(key, htu: "http://x/?q", iat: 0, jti: "", token: nil), Self.request(key)) == .htu)
        #expect(rule(try Self.proof(key, iat: 0, jti: "", token: nil), Self.request(key)) == .iat)
        #expect(rule(try Self.proof(key, jti: "", token: nil), Self.request(key)) == .ath)
    }

    // MARK: cnf.jkt in tokens

    @Test func tokenClaimsCarryCnfJkt() throws {
        let policy = AppCheckPolicy(projectNumber: "123", clockSkew: 60)
        func claims(_ extra: String) throws -> Result<VerifiedClaims, AppCheckReason> {
            let payload = "{\"iss\":\"\(policy.issuer)\",\"aud\":[\"projects/123\"],\"sub\":\"1:123:web:abc\",\"exp\":\(Int(Self.now) + 600),\"iat\":\(Int(Self.now))\(extra)}"
            let token = Base64URL.encode(Array("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k\"}".utf8)) + "."
                + Base64URL.encode(Array(payload.utf8)) + "." + Base64URL.encode([1, 2, 3])
            let parsed = try AppCheckToken.parse(Array(token.utf8)).get()
            return AppCheckVerifier.checkClaims(parsed.claims, policy: policy, now: Self.now)
        }
        #expect(try claims("").get().boundThumbprint == nil)
        #expect(try claims(",\"cnf\":{\"jkt\":\"abc\"}").get().boundThumbprint == "abc")
        for wrong in [",\"cnf\":\"abc\"", ",\"cnf\":{}", ",\"cnf\":{\"jkt\":\"\"}", ",\"cnf\":{\"jkt\":1}", ",\"cnf\":{\"x5t#S256\":\"abc\"}"] {
            #expect(throws: AppCheckReason.malformed) { try claims(wrong).get() }
        }
    }
}
