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
            // Object starts the memo may resume after (`iss`, `sub`, `aud` lead), then every kind of tail: a key of
            // the start again (plain, escaped, past the sixteen keys compared one by one), whitespace, nothing,
            // truncation; and starts that differ by a byte, a value type, a member between, or a long key.
            + Self.prefixTails.map { Self.prefix + $0 }
            + [" " + Self.prefix + #""exp":1,"iat":1}"#,
               Self.prefix.replacingOccurrences(of: "my-project", with: "my-projecu") + #""exp":1,"iat":1}"#,
               #"{"iss":5,"sub":"a","aud":["x"],"exp":1,"iat":1}"#, #"{"iss":5,"sub":"a","aud":["x"],"iss":1}"#,
               #"{"iss":"a","provider":"debug","sub":"b","aud":[],"exp":1,"iat":1}"#,
               #"{"iss":"a","provider":"debug","sub":"b","aud":[],"provider":"x"}"#,
               #"{"iss":"a","issuer_longer":"x","sub":"b","exp":1,"iat":1}"#,
               #"{"iss":"a","sub":"b","aud":["c"]}"#, #"{"iss":"a","sub":"b","aud":["c"],"sub":"d"}"#]
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

    /// A payload start as tokens of one app share it (`iss`, `sub`, `aud` first, as Firebase and `mint` write them).
    static let prefix = #"{"iss":"https://firebaseappcheck.googleapis.com/123456789012","sub":"1:123456789012:ios:abcdef0123456789","aud":["projects/123456789012","projects/my-project"],"#
    static let prefixTails = [
        #""exp":9999999999,"iat":1}"#, #""iss":"x","exp":1,"iat":1}"#, #""\u0069ss":"x","exp":1,"iat":1}"#,
        #""a\u0075d":[],"exp":1}"#, #""sub ":"x","exp":1,"iat":1}"#, "}", #" "exp" : 1 , "iat":1 } "#, #""exp":1"#, "",
        #""exp":1,"iat":1,"jti":"a","provider":"p","risk":1,"nbf":0,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"iss":1}"#,
        #""exp":1,"iat":1,"jti":"a","provider":"p","risk":1,"nbf":0,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"\u0073ub":1}"#,
        #""exp":1,"iat":1,"jti":"a","provider":"p","risk":1,"nbf":0,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":1}"#,
        #""exp":1,"iat":1,"jti":"\u00e9","provider":"\ud83d\ude00"}"#,
        #""exp":1,"iat":1,"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
    ]

    /// Resuming after a remembered object start gives the same slots and the same refusals as the full scan, whatever
    /// follows the start; the start is found again by its bytes alone, under the same depth bound.
    @Test func objectStartsResumeToTheFullScansResult() throws {
        func scanned(_ text: String, memo: StrictJSON.StringMemo?) -> String {
            var slots = StrictJSON.MemberSlots()
            do {
                try Array(text.utf8).withUnsafeBufferPointer { (buffer) throws(StrictJSON.ParseError) in
                    try StrictJSON.scanObject(buffer, into: &slots, strings: memo, memoSlots: TokenClaims.memoSlots,
                                              select: TokenClaims.claimSlot)
                }
            } catch {
                return "refused \(error)"
            }
            return "\((0..<StrictJSON.MemberSlots.count).map { String(describing: slots.get($0)) })"
        }
        func lookUp(_ text: String, in memo: StrictJSON.StringMemo, maxDepth: Int = StrictJSON.defaultMaxDepth) -> (count: Int, end: Int)? {
            Array(text.utf8).withUnsafeBufferPointer { buffer in
                memo.objectPrefix(in: buffer, maxDepth: maxDepth, memoSlots: TokenClaims.memoSlots).map { ($0.prefix.count, $0.end) }
            }
        }
        let memo = StrictJSON.StringMemo()
        let first = Self.prefix + Self.prefixTails[0]
        #expect(lookUp(first, in: memo) == nil)
        #expect(scanned(first, memo: memo) == scanned(first, memo: nil))
        // Remembered now: found for the same start whatever follows, not for another start or another depth bound.
        let found = try #require(lookUp(Self.prefix + "}", in: memo))
        #expect(found.count == 3 && found.end == Self.prefix.utf8.count)
        #expect(lookUp(first, in: memo, maxDepth: 1) == nil)
        #expect(lookUp(" " + first, in: memo) == nil)
        #expect(lookUp(String(Self.prefix.dropLast()), in: memo) == nil)
        for tail in Self.prefixTails + Self.prefixTails.reversed() {
            #expect(scanned(Self.prefix + tail, memo: memo) == scanned(Self.prefix + tail, memo: nil), "\(tail)")
        }
        // The deep tail is refused for its depth, after the start as before it.
        #expect(scanned(Self.prefix + Self.prefixTails.last!, memo: memo).hasPrefix("refused"))
    }

    /// The members after a remembered start, scanned value by value when the bytes between their values are those of
    /// the object first scanned with it (`ObjectTail`), keep the full scan's slots and refusals: other values of every
    /// kind and length, invalid and deep values, more or less whitespace, a member more or less, names that differ by a
    /// byte or an escape, truncation, trailing bytes.
    @Test func objectTailsScanValueByValueToTheFullScansResult() throws {
        func scanned(_ text: String, memo: StrictJSON.StringMemo?, maxDepth: Int = StrictJSON.defaultMaxDepth) -> String {
            var slots = StrictJSON.MemberSlots()
            do {
                try Array(text.utf8).withUnsafeBufferPointer { (buffer) throws(StrictJSON.ParseError) in
                    try StrictJSON.scanObject(buffer, maxDepth: maxDepth, into: &slots, strings: memo,
                                              memoSlots: TokenClaims.memoSlots, select: TokenClaims.claimSlot)
                }
            } catch {
                return "refused \(error)"
            }
            return "\((0..<StrictJSON.MemberSlots.count).map { String(describing: slots.get($0)) })"
        }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        let tails = [
            #""exp":1764397700,"iat":1764397400,"jti":"aBcD-_0123456789xyzABC"}"#,
            #""exp":1,"iat":2,"jti":"j"}"#, #""exp":-0,"iat":1e3,"jti":"\u00e9\n"}"#, #""exp":1.5,"iat":0,"jti":""}"#,
            #""exp":01,"iat":2,"jti":"j"}"#, #""exp":1,"iat":2,"jti":"j\x"}"#, #""exp":1,"iat":2,"jti":"\ud800"}"#,
            #""exp":"1","iat":null,"jti":7}"#, #""exp":[1,{"a":[]}],"iat":{"exp":1},"jti":true}"#,
            #""exp":\#(deep),"iat":2,"jti":"j"}"#, #""exp":1,"iat":2,"jti":\#(deep)}"#,
            #""exp": 1,"iat":2,"jti":"j"}"#, #""exp":1 ,"iat":2,"jti":"j"}"#, #""exp":1,"iat":2,"jti":"j" }"#,
            #""exp":1,"iat":2,"jti":"j","nbf":0}"#, #""exp":1,"iat":2}"#, #""exp":1,"iat":2,"jtj":"j"}"#,
            #""exp":1,"iat":2,"j\u0074i":"j"}"#, #""exp":1,"iat":2,"exp":"j"}"#, #""exp":1,"iat":2,"iss":"j"}"#,
            #""exp":1,"iat":2,"jti":"j""#, #""exp":1,"iat":2,"jti":"#, #""exp":1,"iat":2,"jti":"j"}}"#,
            #""exp":1,"iat":2,"jti":"j"} "#, #""exp":1,"iat":2,"jti":"j"},"#, #""exp"#, "",
        ]
        for maxDepth in [StrictJSON.defaultMaxDepth, 3] {
            let memo = StrictJSON.StringMemo()
            // The first object remembers the start and its tail; the others follow it.
            for tail in tails + tails.reversed() {
                let text = Self.prefix + tail
                #expect(scanned(text, memo: memo, maxDepth: maxDepth) == scanned(text, memo: nil, maxDepth: maxDepth),
                        "\(maxDepth) \(tail)")
            }
        }
    }

    /// The bytes between a remembered tail's values are compared in place by size (one byte, two or three, four to
    /// seven, eight to sixteen, more): a tail whose between-bytes are of each size, changed at every byte, scans through
    /// the memo to exactly the full scan's slots or refusal.
    @Test func tailBytesOfEverySizeCompareByteForByte() {
        func scanned(_ bytes: [UInt8], memo: StrictJSON.StringMemo?) -> String {
            var slots = StrictJSON.MemberSlots()
            do {
                try bytes.withUnsafeBufferPointer { (buffer) throws(StrictJSON.ParseError) in
                    try StrictJSON.scanObject(buffer, into: &slots, strings: memo, memoSlots: TokenClaims.memoSlots,
                                              select: TokenClaims.claimSlot)
                }
            } catch {
                return "refused \(error)"
            }
            return "\((0..<StrictJSON.MemberSlots.count).map { String(describing: slots.get($0)) })"
        }
        // Between values: `"exp":` 6 bytes, `,"iat":` 7, `,"provider":` 12, `,"nbf"` and twelve spaces and `:` 19,
        // `,"risk":` 8; then `}` 1 or `  }` 3 (and `,"jti":` 7 before a 2-byte close).
        let tails = [
            #""exp":1,"iat":2,"provider":"p","nbf"            :0,"risk":1}"#,
            #""exp":1,"iat":2,"provider":"p","nbf"            :0,"risk":1  }"#,
            #""exp":1,"jti":"j" }"#,
        ]
        let start = Array(Self.prefix.utf8)
        for tail in tails {
            let memo = StrictJSON.StringMemo()
            let first = start + Array(tail.utf8)
            #expect(scanned(first, memo: memo) == scanned(first, memo: nil))
            #expect(scanned(first, memo: memo) == scanned(first, memo: nil))
            for position in start.count..<first.count {
                for byte in [UInt8(ascii: "x"), UInt8(ascii: " "), UInt8(ascii: "\""), UInt8(ascii: "}")] where byte != first[position] {
                    var changed = first
                    changed[position] = byte
                    #expect(scanned(changed, memo: memo) == scanned(changed, memo: nil), "\(tail) at \(position - start.count)")
                }
            }
        }
    }

    /// Payload parts that share their first characters with the one the memo remembers decode, through the memo,
    /// to exactly what they decode to alone: whatever they share (less than a quantum, whole quanta, all of it), and
    /// when the rest is refused (a foreign character, non-canonical last bits, a length no encoding has).
    @Test func payloadPartsSharingTheirStartDecodeAsAlone() throws {
        let memo = AppCheckToken.ParseMemo()
        func viaMemo(_ text: [UInt8]) -> [UInt8]? {
            guard let capacity = Base64URL.decodedCount(text.count) else { return nil }
            var out = [UInt8](repeating: 0, count: max(capacity, 1))
            let n = text.withUnsafeBytes { t in out.withUnsafeMutableBufferPointer { memo.decodePayload(t, into: $0.baseAddress!) } }
            return n.map { Array(out[..<$0]) }
        }
        let base = Array(b64(Fixtures.claims(adding: [("jti", "\"first\"")])).utf8)
        var texts: [[UInt8]] = [base, Array(b64(Fixtures.claims(adding: [("jti", "\"second\"")])).utf8)]
        for length in stride(from: 0, through: base.count, by: 5) { texts.append(Array(base[..<length])) }
        for position in [0, 3, 31, 32, 40, base.count - 2, base.count - 1] {
            for byte in [UInt8(ascii: "A"), UInt8(ascii: "_"), UInt8(ascii: "="), UInt8(ascii: "+"), 0x00] {
                var changed = base
                changed[position] = byte
                texts.append(changed)
            }
        }
        texts += [base + Array("A".utf8), base + Array("AA".utf8), base + Array("AB".utf8), base + Array("QUJD".utf8),
                  Array(b64(#"{"iss":"x"}"#).utf8), base]
        for text in texts + texts.reversed() + texts {
            let alone = text.count % 4 == 1 ? nil : Base64URL.decode(text)
            #expect(viaMemo(text) == alone, "\(String(decoding: text, as: UTF8.self))")
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

    /// The memo lends its signature buffer to one parse at a time: a parse made while an earlier token's value is still
    /// held leaves that value's signature as it was (copy on write), and when the earlier value is gone the buffer is
    /// reused (the same storage).
    @Test func signaturesParsedThroughTheMemoStayTheirOwn() throws {
        let memo = AppCheckToken.ParseMemo()
        let first = Array(try Fixtures.token(jti: "a").utf8), second = Array(try Fixtures.token(jti: "b").utf8)
        let expected = { (token: [UInt8]) in
            Base64URL.decode(token[(token.lastIndex(of: UInt8(ascii: "."))! + 1)...])!
        }
        let held = try AppCheckToken.parse(first, memo: memo).get()
        let next = try AppCheckToken.parse(second, memo: memo).get()
        #expect(held.signature == expected(first))
        #expect(next.signature == expected(second))
        #expect(held.signature != next.signature)
        // A refused token's signature part is not kept either: the held values do not change.
        #expect(verdict(AppCheckToken.parse(Array(first.dropLast(2)) + Array("!!".utf8), memo: memo)) == "refused malformed")
        #expect(held.signature == expected(first) && next.signature == expected(second))

        // Once nothing holds the last value, the next parse decodes into the same storage.
        func storage(_ bytes: [UInt8]) -> UnsafeRawPointer? { bytes.withUnsafeBytes { $0.baseAddress } }
        var address: UnsafeRawPointer?
        do { address = storage(try AppCheckToken.parse(first, memo: memo).get().signature) }
        let again = try AppCheckToken.parse(second, memo: memo).get()
        #expect(storage(again.signature) == address)
        #expect(again.signature == expected(second))
    }

    /// A token that is a slice of a larger buffer (the gateway parses it where it lies in the request head) parses
    /// exactly as the same bytes in an array of their own: offsets count from the slice's start.
    @Test func aTokenInsideALargerBufferParsesAsItsOwnBytes() throws {
        let token = Array(try Fixtures.token(jti: "j1").utf8)
        let head = Array("GET / HTTP/1.1\r\nX-Firebase-AppCheck: ".utf8) + token + Array("\r\n\r\n".utf8)
        let start = head.count - 4 - token.count
        let slice = head[start..<(start + token.count)]
        #expect(slice.startIndex > 0)
        for memo in [nil, AppCheckToken.ParseMemo()] {
            let parsed = try AppCheckToken.parse(slice, memo: memo).get()
            #expect(verdict(.success(parsed)) == verdict(AppCheckToken.parse(token)))
            #expect(Array(parsed.signingInput) == Array(token[..<token.lastIndex(of: UInt8(ascii: "."))!]))
            #expect(parsed.payload.member("jti") == .string("j1"))
        }
        // Refusals too: a slice that stops one byte short of the token.
        #expect(verdict(AppCheckToken.parse(head[start..<(start + token.count - 1)])) == verdict(AppCheckToken.parse(Array(token.dropLast()))))
    }
}
