import Foundation
import Testing
@testable import AppCheck

@Suite struct JWKSetTests {
    private func entry(_ jwk: [String: String]) -> String {
        "{" + jwk.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",") + "}"
    }

    private func document(_ entries: [String]) -> [UInt8] { Array(("{\"keys\":[" + entries.joined(separator: ",") + "]}").utf8) }

    private func goodJWK(_ kid: String, key: RSAPrivateKey? = Fixtures.signingKey) throws -> [String: String] {
        try #require(key).publicKey.jwk(kid: kid)
    }

    @Test func keepsUsableKeysAndLooksUpByExactKid() throws {
        let set = try Fixtures.keySet()
        #expect(set.count == 1)
        #expect(set.kids == [Fixtures.kid])
        #expect(set.skipped.isEmpty)
        let message = Array("m".utf8)
        let signature = try Fixtures.key().signRS256(message)
        #expect(try #require(set.key(for: Fixtures.kid)).verifyRS256(signingInput: message, signature: signature))
        #expect(set.key(for: "kid-other") == nil)
        #expect(set.key(for: "KID-MAIN") == nil)
        #expect(set.key(for: "") == nil)
    }

    @Test func skipsUnusableEntriesWithReasons() throws {
        var noUse = try goodJWK("no-use-no-alg")
        noUse["use"] = nil
        noUse["alg"] = nil
        var enc = try goodJWK("enc")
        enc["use"] = "enc"
        var rs512 = try goodJWK("rs512")
        rs512["alg"] = "RS512"
        var ec = try goodJWK("ec")
        ec["kty"] = "EC"
        var emptyKid = try goodJWK("")
        emptyKid["kid"] = ""
        var noKid = try goodJWK("x")
        noKid["kid"] = nil
        var eOne = try goodJWK("e-one")
        eOne["e"] = "AQ"
        var eEven = try goodJWK("e-even")
        eEven["e"] = "AQAC"
        var padded = try goodJWK("padded-n")
        padded["n"] = (padded["n"] ?? "") + "=="
        var tooBig = try goodJWK("too-big")
        tooBig["n"] = Base64URL.encode([UInt8](repeating: 0xC5, count: 513))  // 4104 bits
        var exactlyMax = try goodJWK("max")
        exactlyMax["n"] = Base64URL.encode([UInt8](repeating: 0xC5, count: 512))  // 4096 bits, odd
        var small = try goodJWK("small")
        small["n"] = Base64URL.encode([0x80] + [UInt8](repeating: 0x01, count: 254))  // 2040 bits
        let entries = [entry(try goodJWK("good")), entry(noUse), entry(enc), entry(rs512), entry(ec), entry(emptyKid),
                       entry(noKid), entry(eOne), entry(eEven), entry(padded), entry(tooBig), entry(small),
                       entry(exactlyMax), "42",
                       #"{"kid":"ops","kty":"RSA","key_ops":["encrypt"],"n":"\#(try goodJWK("o")["n"] ?? "")","e":"AQAB"}"#]
        let set = try JWKSet.parse(document(entries))
        #expect(set.kids == ["good", "no-use-no-alg", "max"])
        let reasons = set.skipped.map(\.reason)
        #expect(reasons == [.wrongUse("enc"), .wrongAlgorithm("RS512"), .unsupportedKeyType("EC"), .missingKid, .missingKid,
                            .invalidKeyMaterial("invalid key encoding: exponent must be odd, at least 3 and at most 64 bits"),
                            .invalidKeyMaterial("invalid key encoding: exponent must be odd, at least 3 and at most 64 bits"),
                            .invalidKeyMaterial("n missing or not strict base64url"),
                            .unsupportedKeySize(4104), .unsupportedKeySize(2040), .notAnObject, .wrongKeyOperations])
        #expect(set.skipped.map(\.index) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14])
        #expect(set.skipped.first?.description == "keys[2] (kid enc): use enc is not sig")
    }

    @Test func duplicateKidDropsEveryEntryWithThatKid() throws {
        let a = try goodJWK("dup")
        let b = try goodJWK("dup", key: Fixtures.otherKey)
        let set = try JWKSet.parse(document([entry(a), entry(try goodJWK("solo")), entry(b)]))
        #expect(set.kids == ["solo"])
        #expect(set.key(for: "dup") == nil)
        #expect(set.skipped.map(\.reason) == [.duplicateKid, .duplicateKid])
        #expect(set.skipped.map(\.index) == [0, 2])
        // A duplicate that is itself unusable still makes the kid ambiguous.
        var ecDup = try goodJWK("solo")
        ecDup["kty"] = "EC"
        #expect(throws: JWKSet.ParseError.self) { try JWKSet.parse(self.document([self.entry(try self.goodJWK("solo")), self.entry(ecDup)])) }
    }

    @Test func refusesUnusableDocuments() throws {
        #expect(throws: JWKSet.ParseError.missingKeysArray) { try JWKSet.parse(Array(#"{"keys":{}}"#.utf8)) }
        #expect(throws: JWKSet.ParseError.missingKeysArray) { try JWKSet.parse(Array("[]".utf8)) }
        #expect(throws: JWKSet.ParseError.noUsableKeys([])) { try JWKSet.parse(Array(#"{"keys":[]}"#.utf8)) }
        let duplicateJSONKey = "{\"keys\":[\(entry(try goodJWK("a")))],\"keys\":[]}"
        do {
            _ = try JWKSet.parse(Array(duplicateJSONKey.utf8))
            Issue.record("duplicate JSON key accepted")
        } catch {
            guard case .invalidJSON(let inner) = error else { Issue.record("wrong error \(error)"); return }
            #expect(inner.kind == .duplicateKey)
        }
    }

    private func wycheproofKeys(_ group: [String: Any]) throws -> [[String: Any]] {
        let holder = try #require((group["public"] ?? group["private"]) as? [String: Any])
        if let keys = holder["keys"] as? [[String: Any]] { return keys }
        return [holder]
    }

    private func jwksBytes(_ keys: [[String: Any]]) throws -> [UInt8] {
        // Drop private members: a JWKS only publishes public keys.
        let publicKeys = keys.map { $0.filter { !["d", "p", "q", "dp", "dq", "qi"].contains($0.key) } }
        return Array(try JSONSerialization.data(withJSONObject: ["keys": publicKeys]))
    }

    /// Wycheproof's JSON Web Key cases that concern RSA key sets.
    @Test func wycheproofJsonWebKeyCases() throws {
        let document = try Fixtures.wycheproof("json_web_key_test.json")
        var seen: Set<String> = []
        for group in try #require(document["testGroups"] as? [[String: Any]]) {
            let comment = group["comment"] as? String ?? ""
            let keys = try wycheproofKeys(group)
            let bytes = try jwksBytes(keys)
            let parsed = Result { () throws(JWKSet.ParseError) -> JWKSet in try JWKSet.parse(bytes) }
            switch comment {
            case "rs256" where keys.first?["use"] as? String == "sig":
                #expect(try parsed.get().kids == ["kid-rsa-sign"])
            case "rs256":  // use enc, alg RSA1_5
                #expect(throws: JWKSet.ParseError.noUsableKeys([.init(index: 0, kid: "kid-rsa-sign", reason: .wrongUse("enc"))])) { try parsed.get() }
            case "keysize_too_small":
                #expect(throws: JWKSet.ParseError.noUsableKeys([.init(index: 0, kid: "RS256_1024", reason: .unsupportedKeySize(1024))])) { try parsed.get() }
            case "exponentOne":
                guard case .failure(.noUsableKeys(let skipped)) = parsed, case .invalidKeyMaterial = skipped.first?.reason else {
                    Issue.record("e=1 key was not refused: \(parsed)"); continue
                }
            case "wrong_kty":  // kty RSA with EC members and alg ES256
                #expect(throws: JWKSet.ParseError.noUsableKeys([.init(index: 0, kid: "kid-ec-sign", reason: .wrongAlgorithm("ES256"))])) { try parsed.get() }
            case "jws_rsa_roca_key":
                // Documented limitation: ROCA fingerprints are not detected; the key set is trusted for that.
                #expect(try parsed.get().kids == ["kid-rsa-roca-sign"])
            default:
                // Symmetric and EC sets: nothing usable for RS256.
                guard case .failure(.noUsableKeys(let skipped)) = parsed else { Issue.record("\(comment): accepted"); continue }
                #expect(skipped.count == keys.count)
            }
            seen.insert(comment)
        }
        #expect(seen.isSuperset(of: ["rs256", "keysize_too_small", "exponentOne", "wrong_kty", "jws_duplicate_kid", "HS256"]))
    }

    @Test func documentRoundTrips() throws {
        let a = try Fixtures.key().publicKey
        let b = try #require(Fixtures.otherKey).publicKey
        let text = JWKSet.document(for: [("a\"quote", a), ("b", b)])
        let set = try JWKSet.parse(Array(text.utf8))
        #expect(set.kids == ["a\"quote", "b"])
        #expect(set.key(for: "b")?.modulus == b.modulus)
        #expect(text.hasPrefix(#"{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"a\"quote","n":""#))
    }

    /// Custom-token backends may publish P-256 keys (docs/issuer.md); Firebase's and trusted issuers' sets never keep them.
    @Test func p256KeysOnlyWhenAsked() throws {
        let key = try ES256PrivateKey.generate()
        let point = try #require(key.publicKey.derRepresentation).suffix(64)
        let x = Base64URL.encode(Array(point.prefix(32))), y = Base64URL.encode(Array(point.suffix(32)))
        let rsa = JWKSet.document(for: [(kid: "r", key: try RSAPrivateKey.generate(bits: 2048).publicKey)])
        func document(_ ec: String) -> [UInt8] { Array(rsa.replacingOccurrences(of: "[{", with: "[\(ec),{").utf8) }
        let ec = #"{"kty":"EC","crv":"P-256","kid":"e","x":"\#(x)","y":"\#(y)"}"#

        let firebase = try JWKSet.parse(document(ec))
        #expect(firebase.kids == ["r"] && firebase.es256Key(for: "e") == nil)
        #expect(firebase.skipped.map(\.reason) == [.unsupportedKeyType("EC")])

        let custom = try JWKSet.parse(document(ec), acceptES256: true)
        #expect(custom.kids == ["e", "r"])
        #expect(custom.es256Key(for: "e") != nil && custom.key(for: "e") == nil && custom.key(for: "r") != nil)
        let message = Array("signed".utf8)
        #expect(try custom.es256Key(for: "e")?.verifyES256(signingInput: message, signature: key.signES256(message)) == true)

        let p384 = try JWKSet.parse(document(ec.replacingOccurrences(of: "P-256", with: "P-384")), acceptES256: true)
        #expect(p384.kids == ["r"] && p384.skipped.count == 1)
        let wrongAlg = try JWKSet.parse(document(ec.replacingOccurrences(of: #""kid""#, with: #""alg":"RS256","kid""#)), acceptES256: true)
        #expect(wrongAlg.skipped.map(\.reason) == [.wrongAlgorithm("RS256")])
        let shortX = try JWKSet.parse(document(ec.replacingOccurrences(of: x, with: Base64URL.encode([1, 2, 3]))), acceptES256: true)
        #expect(shortX.kids == ["r"])
    }
}
