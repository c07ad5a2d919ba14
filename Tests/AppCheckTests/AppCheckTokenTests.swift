import Foundation
import Testing
@testable import AppCheck

@Suite struct AppCheckTokenTests {
    private func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    private func parseReason(header: String, payload: String = Fixtures.claims(), signature: String = "c2ln") -> AppCheckReason? {
        Fixtures.reason(AppCheckToken.parse(b64(header) + "." + b64(payload) + "." + signature))
    }

    @Test func parsesAFirebaseShapedToken() throws {
        let token = try Fixtures.token(jti: "j1")
        let parsed = try AppCheckToken.parse(token).get()
        #expect(parsed.kid == Fixtures.kid)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(String(decoding: parsed.signingInput, as: UTF8.self) == parts[0] + "." + parts[1])
        #expect(parsed.signature == Base64URL.decode(String(parts[2])))
        #expect(parsed.signature.count == 256)
        #expect(String(decoding: Base64URL.decode(String(parts[0])) ?? [], as: UTF8.self) == Fixtures.goodHeader)
        #expect(parsed.payload.member("jti") == .string("j1"))
        #expect(parsed.header == (try StrictJSON.parse(Array(Fixtures.goodHeader.utf8))))
        #expect(AppCheckToken.maxLength == 4096)
    }

    @Test func structureAndLengthLimits() throws {
        #expect(Fixtures.reason(AppCheckToken.parse("")) == .missing)
        #expect(Fixtures.reason(AppCheckToken.parse(String(repeating: "a", count: 4097))) == .tooLarge)
        let token = try Fixtures.token()
        for bad in ["a.b", "a.b.c.d", token + ".", "." + token, token.replacingOccurrences(of: ".", with: ".."),
                    token + "=", token.replacingOccurrences(of: ".", with: "=."), token + " ", " " + token,
                    token.replacingOccurrences(of: "-", with: "+"), "..", "a..c"] {
            #expect(Fixtures.reason(AppCheckToken.parse(bad)) == .malformed, "\(bad.prefix(40))")
        }
    }

    @Test func paddedPartsAreMalformed() throws {
        let header = Base64URL.encode(Array(Fixtures.goodHeader.utf8))
        // Pad every part to a multiple of four with "=" the way standard base64 would.
        func pad(_ s: Substring) -> String { String(s) + String(repeating: "=", count: (4 - s.count % 4) % 4) }
        let parts = try Fixtures.token().split(separator: ".")
        #expect(header.count % 4 != 0)
        for index in 0..<3 where parts[index].count % 4 != 0 {
            var copy = parts.map(String.init)
            copy[index] = pad(parts[index])
            #expect(Fixtures.reason(AppCheckToken.parse(copy.joined(separator: "."))) == .malformed)
        }
    }

    @Test func nonCanonicalTrailingBitsAreMalformed() throws {
        let token = try Fixtures.token()
        var parts = token.split(separator: ".").map(String.init)
        // The 256-byte signature leaves 2 unused bits in its last character (256 % 3 == 1 → 4 unused bits).
        let last = try #require(parts[2].last)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let value = try #require(alphabet.firstIndex(of: last))
        parts[2] = String(parts[2].dropLast()) + String(alphabet[value | 1])
        #expect(value & 1 == 0)
        #expect(Fixtures.reason(AppCheckToken.parse(parts.joined(separator: "."))) == .malformed)
    }

    @Test func headerRules() {
        #expect(parseReason(header: #"{"alg":"none","kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"HS256","kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"ES256","kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"PS256","kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"rs256","kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":["RS256"],"kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"kid":"k","typ":"JWT"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"RS256","kid":"k"}"#) == .wrongType)
        #expect(parseReason(header: #"{"alg":"RS256","kid":"k","typ":"jwt"}"#) == .wrongType)
        #expect(parseReason(header: #"{"alg":"RS256","kid":"k","typ":"at+jwt"}"#) == .wrongType)
        #expect(parseReason(header: #"{"alg":"RS256","typ":"JWT"}"#) == .malformed)
        #expect(parseReason(header: #"{"alg":"RS256","kid":"","typ":"JWT"}"#) == .malformed)
        #expect(parseReason(header: #"{"alg":"RS256","kid":7,"typ":"JWT"}"#) == .malformed)
        for name in ["crit", "jku", "x5u", "jwk", "x5c", "b64"] {
            #expect(parseReason(header: #"{"alg":"RS256","kid":"k","typ":"JWT","\#(name)":null}"#) == .malformed)
        }
        #expect(parseReason(header: #"{"alg":"RS256","kid":"k","typ":"JWT","extra":1}"#) == nil)
        // First failure wins: alg before typ before kid.
        #expect(parseReason(header: #"{"alg":"none"}"#) == .unsupportedAlgorithm)
        #expect(parseReason(header: #"{"alg":"RS256","jwk":{}}"#) == .wrongType)
    }

    @Test func headerAndPayloadMustBeStrictObjects() {
        #expect(parseReason(header: #"{"alg":"RS256","alg":"RS256","kid":"k","typ":"JWT"}"#) == .malformed)
        #expect(parseReason(header: #"{"alg":"none","alg":"RS256","kid":"k","typ":"JWT"}"#) == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader, payload: Fixtures.claims(adding: [("sub", "\"evil\"")])) == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader, payload: "[]") == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader, payload: "foo") == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader, payload: Fixtures.claims() + " x") == .malformed)
        #expect(parseReason(header: "[]") == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader, payload: "") == .malformed)
        #expect(parseReason(header: Fixtures.goodHeader + "\u{0}") == .malformed)
        // Payload problems are step 2, so they beat header rules of step 3.
        #expect(parseReason(header: #"{"alg":"none"}"#, payload: "foo") == .malformed)
    }

    @Test func embeddedJwkIsNeverHonoured() throws {
        // An attacker signs with their own key and ships it in the header under a kid we know.
        let attacker = try #require(Fixtures.otherKey)
        let jwk = try attacker.publicKey.jwk(kid: Fixtures.kid)
        let jwkJSON = "{" + jwk.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",") + "}"
        let header = #"{"alg":"RS256","kid":"kid-main","typ":"JWT","jwk":\#(jwkJSON)}"#
        let token = try TokenMinter.mintRaw(headerJSON: header, payloadJSON: Fixtures.claims(), key: attacker)
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: token, keys: try Fixtures.keySet(), policy: Fixtures.policy, now: Fixtures.now)) == .malformed)
        // And without the header the attacker's signature is simply bad.
        let plain = try TokenMinter.mintRaw(headerJSON: Fixtures.goodHeader, payloadJSON: Fixtures.claims(), key: attacker)
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: plain, keys: try Fixtures.keySet(), policy: Fixtures.policy, now: Fixtures.now)) == .badSignature)
    }

    @Test func hs256KeyConfusionIsRefused() throws {
        // The classic attack: HMAC the token with the RSA public key bytes as the secret.
        let header = b64(#"{"alg":"HS256","kid":"kid-main","typ":"JWT"}"#)
        let signingInput = header + "." + b64(Fixtures.claims())
        let secret = try #require(try Fixtures.key().publicKey.derRepresentation)
        let mac = hmacSHA256(key: secret, message: Array(signingInput.utf8))
        let token = signingInput + "." + Base64URL.encode(mac)
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: token, keys: try Fixtures.keySet(), policy: Fixtures.policy, now: Fixtures.now)) == .unsupportedAlgorithm)
        // alg none with an empty signature.
        let none = b64(#"{"alg":"none","kid":"kid-main","typ":"JWT"}"#) + "." + b64(Fixtures.claims()) + "."
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: none, keys: try Fixtures.keySet(), policy: Fixtures.policy, now: Fixtures.now)) == .unsupportedAlgorithm)
    }

    private func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? SHA256Digest.hash(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = SHA256Digest.hash(k.map { $0 ^ 0x36 } + message)
        return SHA256Digest.hash(k.map { $0 ^ 0x5C } + inner)
    }

    /// Every Wycheproof JWS vector is refused by the App Check pipeline (none is an App Check token: no
    /// `typ`, non-JSON payloads, other algorithms), whatever its JWS-level verdict.
    @Test func wycheproofJwsVectorsAreNeverAccepted() throws {
        let document = try Fixtures.wycheproof("json_web_signature_test.json")
        let keys = try Fixtures.keySet()
        var count = 0
        for group in try #require(document["testGroups"] as? [[String: Any]]) {
            for test in try #require(group["tests"] as? [[String: Any]]) {
                let jws = try #require(test["jws"] as? String)
                if case .success = AppCheckVerifier.verify(token: jws, keys: keys, policy: Fixtures.policy, now: Fixtures.now) {
                    Issue.record("tcId \(test["tcId"] ?? "?") accepted")
                }
                count += 1
            }
        }
        #expect(count == document["numberOfTests"] as? Int)
    }

    /// JWS-level RS256 verdicts of Wycheproof's RS256 groups, through our strict split/decode, strict header
    /// JSON, fixed algorithm, and `RSAPublicKey` loaded by `JWKSet`: valid ↔ accepted.
    @Test func wycheproofRS256SignatureVerdicts() throws {
        let document = try Fixtures.wycheproof("json_web_signature_test.json")
        var checked = 0
        for group in try #require(document["testGroups"] as? [[String: Any]]) {
            let holder = try #require((group["public"] ?? group["private"]) as? [String: Any])
            guard holder["kty"] as? String == "RSA" || holder["n"] != nil, holder["alg"] as? String == "RS256" else { continue }
            let publicJWK = holder.filter { !["d", "p", "q", "dp", "dq", "qi"].contains($0.key) }
            let keySet = try JWKSet.parse(Array(try JSONSerialization.data(withJSONObject: ["keys": [publicJWK.merging(["kty": "RSA"]) { a, _ in a }]])))
            let kid = try #require(holder["kid"] as? String)
            for test in try #require(group["tests"] as? [[String: Any]]) {
                let jws = try #require(test["jws"] as? String)
                let accepted = jwsVerifies(jws, keys: keySet, kid: kid)
                #expect(accepted == (test["result"] as? String == "valid"), "tcId \(test["tcId"] ?? "?") \(test["comment"] ?? "")")
                checked += 1
            }
        }
        #expect(checked > 200)
    }

    private func jwsVerifies(_ jws: String, keys: JWKSet, kid: String) -> Bool {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
              Base64URL.decode(String(parts[1])) != nil, let signature = Base64URL.decode(String(parts[2])),
              let header = try? StrictJSON.parse(headerBytes), header.member("alg")?.stringEquals("RS256") == true,
              let key = keys.key(for: header.member("kid")?.stringValue ?? kid) else { return false }
        return key.verifyRS256(signingInput: Array((parts[0] + "." + parts[1]).utf8), signature: signature)
    }

    @Test func wycheproofBase64StrictnessCases() throws {
        let document = try Fixtures.wycheproof("json_web_signature_test.json")
        let group = try #require((document["testGroups"] as? [[String: Any]])?.first { $0["comment"] as? String == "base64" })
        var rejected = 0
        for test in try #require(group["tests"] as? [[String: Any]]) {
            let jws = try #require(test["jws"] as? String)
            let comment = test["comment"] as? String ?? ""
            let decodable = jws.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { Base64URL.decode(String($0)) != nil }
            if comment.contains("Spaces") && !comment.contains("Json") || comment.contains("InvalidCharacter")
                || comment.contains("invalidCharacter") || comment.contains("UnusedBits") || comment.contains("0Replaced") {
                // Stricter than Wycheproof's "valid" InvalidCharacterInserted* cases: any non-alphabet byte is refused.
                #expect(!decodable, "\(comment)")
                rejected += 1
            } else if test["result"] as? String == "valid" {
                #expect(decodable, "\(comment)")
            }
        }
        #expect(rejected >= 10)
    }
}
