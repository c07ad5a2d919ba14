import Testing
@testable import AppCheck

/// `AppCheckToken.parse` with a `ParseMemo` gives every token the verdict it gets without one, whatever came before.
@Suite struct ParseMemoTests {
    private func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    /// A verdict to compare: the reason, or the kid, header, payload, signature and claims of an accepted token.
    private func verdict(_ result: Result<ParsedToken, AppCheckReason>) -> String {
        switch result {
        case .failure(let reason): return "refused \(reason)"
        case .success(let parsed):
            let claims = parsed.claims
            return "kid \(parsed.kid) header \(parsed.header) payload \(parsed.payload) signature \(parsed.signature) "
                + "range \(parsed.signingInputRange) iss \(claims.iss) sub \(claims.sub) aud \(claims.aud) \(claims.audAllStrings) "
                + "jti \(claims.jti) exp \(claims.exp) provider \(claims.provider)"
        }
    }

    @Test func sameVerdictsWithAndWithoutTheMemo() throws {
        let headers = [
            Fixtures.goodHeader, #"{"alg":"RS256","kid":"kid-2","typ":"JWT"}"#, #"{"kid":"kid-3","typ":"JWT","alg":"RS256"}"#,
            #" {"alg":"RS256","kid":"kid-main","typ":"JWT"} "#, #"{"alg":"RS\u0032\u0035\u0036","kid":"k5","typ":"JWT"}"#,
            #"{"alg":"RS256","kid":"k6","typ":"JWT","extra":[1,{"a":null}]}"#,
            #"{"alg":"none","kid":"kid-main","typ":"JWT"}"#, #"{"alg":"RS256","kid":"kid-main"}"#,
            #"{"alg":"RS256","kid":"","typ":"JWT"}"#, #"{"alg":"RS256","kid":"kid-main","typ":"JWT","jku":"x"}"#,
            #"{"alg":"RS256","alg":"RS256","kid":"kid-main","typ":"JWT"}"#, #"{"alg":"RS256","kid":"kid-main","typ":"JWT""#,
            "[]", "",
        ]
        let payloads = [
            Fixtures.claims(), Fixtures.claims(adding: [("jti", "\"j1\"")]), Fixtures.claims(adding: [("sub", "\"x\"")]),
            "[]", "{", Fixtures.claims() + " x", "",
            // Claim strings the memo may lend (iss, sub, aud), escaped or not, of equal lengths, more than it keeps.
            Fixtures.claims(["iss": #""https://firebaseappcheck.googleapis.com/123456789013""#]),
            Fixtures.claims(["iss": #""\u0068ttps://firebaseappcheck.googleapis.com/123456789012""#]),
            Fixtures.claims(["aud": #"["projects/123456789012","projects/123456789012"]"#]),
            Fixtures.claims(["aud": #"["projects/123456789013",7,"projects/my-project"]"#]),
            Fixtures.claims(["aud": #"["projects/123456789012",{"k":"projects/123456789012"}]"#]),
            Fixtures.claims(["aud": #""projects/123456789012""#]),
            Fixtures.claims(["sub": #""1:123456789012:ios:abcdef0123456780""#]),
            Fixtures.claims(["sub": #""1:123456789012:ios:abcdef012345678\u0039""#]),
            Fixtures.claims(["sub": #""1:123456789012:ios:é""#]),
            // Arrays the memo may lend (aud): one that starts as another does, escaped members, whitespace, more than
            // it keeps.
            Fixtures.claims(["aud": #"["projects/123456789012"]"#]),
            Fixtures.claims(["aud": #"["projects/123456789012","projects/my-project","x"]"#]),
            Fixtures.claims(["aud": #"["projects/123456789012","projects/\u006dy-project"]"#]),
            Fixtures.claims(["aud": #"[ "projects/123456789012" , "projects/my-project" ]"#]),
            Fixtures.claims(["aud": #"["projects/123456789012","projects/my-project"],"aud":[]"#]),
            "{\"aud\":[\"projects/123456789012\",\"projects/my-project\"]",
            "{\"aud\":[\"projects/123456789012\",\"projects/my-project\"",
        ] + (0..<10).map { Fixtures.claims(["sub": "\"1:123456789012:ios:abcdef01234567\($0)0\""]) }
            + (0..<6).map { Fixtures.claims(["aud": "[\"projects/12345678901\($0)\",\"projects/my-project\"]"]) }
        var tokens: [String] = []
        for header in headers {
            for payload in payloads { tokens.append(b64(header) + "." + b64(payload) + ".c2ln") }
        }
        // A header part that is not base64url, and a real token.
        tokens.append("e30=." + b64(Fixtures.claims()) + ".c2ln")
        tokens.append(try Fixtures.token(jti: "j2"))
        let memo = AppCheckToken.ParseMemo()
        // Twice over in order (the second time every accepted header is known, beyond the memo's four at times),
        // then in reverse.
        for token in tokens + tokens + tokens.reversed() {
            let bytes = Array(token.utf8)
            #expect(verdict(AppCheckToken.parse(bytes, memo: memo)) == verdict(AppCheckToken.parse(bytes)),
                    "\(token.prefix(60))")
        }
    }

    @Test func rememberedArraysAreFoundByTheirBytes() throws {
        let memo = StrictJSON.StringMemo()
        let aud: JSONValue = .array([.string("projects/1"), .string("projects/p")])
        let remembered = Array(#"["projects/1","projects/p"]"#.utf8)
        remembered.withUnsafeBufferPointer { memo.rememberArray($0, aud) }
        func lookUp(_ text: String, at position: Int = 0) -> (JSONValue, Int)? {
            Array(text.utf8).withUnsafeBufferPointer { memo.array(in: $0, at: position).map { ($0.value, $0.end) } }
        }
        // The same bytes, anywhere, followed by anything: that array, ending at its `]`.
        #expect(lookUp(#"["projects/1","projects/p"]"#)?.0 == aud)
        #expect(lookUp(#"["projects/1","projects/p"]"#)?.1 == remembered.count)
        #expect(lookUp(#"{"aud":["projects/1","projects/p"],"x":1}"#, at: 7)?.1 == 7 + remembered.count)
        // Any other bytes, fewer of them, or the same value written otherwise: not found (parsed as usual).
        #expect(lookUp(#"["projects/1","projects/q"]"#) == nil)
        #expect(lookUp(#"["projects/1","projects/p""#) == nil)
        #expect(lookUp(#"["projects/1", "projects/p"]"#) == nil)
        #expect(lookUp(#"["projects/1"]"#) == nil)
        // Only arrays of strings are kept.
        let mixed = Array(#"["projects/1",7]"#.utf8)
        mixed.withUnsafeBufferPointer { memo.rememberArray($0, .array([.string("projects/1"), .number(7, isInteger: true)])) }
        #expect(lookUp(#"["projects/1",7]"#) == nil)
    }

    @Test func rememberedHeadersAreFoundByTheirBytes() throws {
        let memo = AppCheckToken.ParseMemo()
        let token = Array(try Fixtures.token().utf8)
        #expect((try AppCheckToken.parse(token, memo: memo).get()).kid == Fixtures.kid)
        let part = Array(token[..<token.firstIndex(of: UInt8(ascii: "."))!])
        #expect(part.withUnsafeBytes { memo.kid(forHeaderPart: $0) } == Fixtures.kid)
        var other = part
        other[other.count - 1] ^= 1
        #expect(other.withUnsafeBytes { memo.kid(forHeaderPart: $0) } == nil)
        #expect(Array(part.dropLast()).withUnsafeBytes { memo.kid(forHeaderPart: $0) } == nil)
    }
}
