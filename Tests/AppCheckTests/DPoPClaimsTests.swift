import Testing
@testable import AppCheck

/// `DPoPClaims.scan` (the DPoP payload's one pass) accepts exactly the objects `StrictJSON.parse` accepts and finds
/// the same `htm`, `htu`, `iat`, `ath` and `jti` values; hostile payloads (duplicate claims, wrong types, huge numbers,
/// bad UTF-8, escapes, nesting) are refused or read exactly as the tree parser reads them.
@Suite struct DPoPClaimsTests {
    static let names = ["htm", "htu", "iat", "ath", "jti"]

    /// A claim as the tree parser's value, for comparing.
    private static func value(_ claim: DPoPClaims.Value?, in payload: [UInt8]) -> JSONValue? {
        switch claim {
        case .plain(let range)?:
            return .string(String(decoding: payload[range], as: UTF8.self))
        case .json(let value)?:
            return value
        case nil:
            return nil
        }
    }

    private static func scan(_ bytes: [UInt8], maxDepth: Int = StrictJSON.defaultMaxDepth,
                             maxBytes: Int = StrictJSON.defaultMaxBytes) -> DPoPClaims? {
        bytes.withUnsafeBufferPointer { DPoPClaims.scan($0, maxDepth: maxDepth, maxBytes: maxBytes) }
    }

    /// The verdicts of both parsers on `bytes` agree, and so do the five claims; returns the scan's claims.
    @discardableResult
    private func agree(_ bytes: [UInt8], maxDepth: Int = StrictJSON.defaultMaxDepth,
                       maxBytes: Int = StrictJSON.defaultMaxBytes,
                       sourceLocation: SourceLocation = #_sourceLocation) -> DPoPClaims? {
        let tree = try? StrictJSON.parse(bytes, maxDepth: maxDepth, maxBytes: maxBytes)
        let claims = Self.scan(bytes, maxDepth: maxDepth, maxBytes: maxBytes)
        let text = String(decoding: bytes.prefix(80), as: UTF8.self)
        guard let members = tree?.objectMembers else {
            #expect(claims == nil, "scan accepted what parse refused: \(text)", sourceLocation: sourceLocation)
            return claims
        }
        guard let claims else {
            Issue.record("scan refused what parse accepted: \(text)", sourceLocation: sourceLocation)
            return nil
        }
        let found = [claims.htm, claims.htu, claims.iat, claims.ath, claims.jti]
        for (name, claim) in zip(Self.names, found) {
            #expect(Self.value(claim, in: bytes) == members.first(where: { $0.key.utf8.elementsEqual(name.utf8) })?.value,
                    "\(name) in \(text)", sourceLocation: sourceLocation)
        }
        return claims
    }

    @discardableResult
    private func agree(_ text: String, maxDepth: Int = StrictJSON.defaultMaxDepth,
                       sourceLocation: SourceLocation = #_sourceLocation) -> DPoPClaims? {
        agree(Array(text.utf8), maxDepth: maxDepth, sourceLocation: sourceLocation)
    }

    @Test func aProofPayloadIsReadInPlace() throws {
        let text = #"{"jti":"e1j3V_bKic8-LAEB","htm":"GET","htu":"https://a.example/p","iat":1562262616,"ath":"fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo","x":[1,{"y":null}]}"#
        let bytes = Array(text.utf8)
        let claims = try #require(agree(bytes))
        guard case .plain(let htm)? = claims.htm, case .plain(let jti)? = claims.jti else {
            Issue.record("plain strings are kept as ranges")
            return
        }
        #expect(Array(bytes[htm]) == Array("GET".utf8))
        #expect(Array(bytes[jti]) == Array("e1j3V_bKic8-LAEB".utf8))
        #expect(DPoPClaims.number(claims.iat) == 1_562_262_616)
        #expect(DPoPClaims.number(claims.htm) == nil)
    }

    @Test func duplicateClaimsAreRefused() {
        for text in [
            #"{"htm":"GET","htm":"GET"}"#, #"{"htm":"GET","htm":"POST"}"#, #"{"jti":"a","j\u0074i":"b"}"#,
            #"{"\u006a\u0074\u0069":"a","jti":"b"}"#, #"{"iat":1,"iat":2}"#, #"{"x":1,"htu":"h","x":2}"#,
            #"{"htm":"GET","x":{"htm":1,"htm":2}}"#, #"{"":1,"":2}"#,
            "{\"K\":1,\"\u{212A}\":2}", "{\"e\u{301}\":1,\"\u{E9}\":2}",
        ] {
            #expect(agree(text) == nil, "\(text)")
        }
        // Past the linear scan's 16 names.
        let many = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(agree("{" + many + ",\"jti\":\"a\"}") != nil)
        #expect(agree("{" + many + ",\"k3\":1}") == nil)
        #expect(agree("{" + many + ",\"k\\u0033\":1}") == nil)
        #expect(agree("{\"jti\":\"a\"," + many + ",\"jti\":\"b\"}") == nil)
        #expect(agree("{" + many + ",\"K\":1,\"\u{212A}\":2}") == nil)
        // Other members of the same names in nested objects are not claims.
        let nested = agree(#"{"x":{"jti":"inner"},"jti":"outer"}"#)
        #expect(nested.flatMap { Self.value($0.jti, in: Array(#"{"x":{"jti":"inner"},"jti":"outer"}"#.utf8)) } == .string("outer"))
    }

    @Test func wrongTypesAreKeptAsTheirJSON() throws {
        for value in ["1", "-0", "1.5", "true", "false", "null", "[\"GET\"]", "{\"a\":\"GET\"}", "\"\""] {
            for name in Self.names { agree("{\"\(name)\":\(value)}") }
        }
        let claims = try #require(agree(#"{"htm":["GET"],"iat":"1562262616","jti":7}"#))
        guard case .json(.array)? = claims.htm, case .plain? = claims.iat, case .json(.number)? = claims.jti else {
            Issue.record("a value of another type is its JSON, a string claim is a string")
            return
        }
        #expect(DPoPClaims.number(claims.iat) == nil, "a string is not a number")
    }

    @Test func numbersAgree() {
        for value in ["1562262616", "0", "-0", "1e3", "1.5e9", "12345678901234567890", "1e308", "1e999", "-1e999",
                      "01", "+1", ".5", "1.", "1e", "NaN", "Infinity", "0x10", "99999999999999999999999999999999999"] {
            agree("{\"iat\":\(value)}")
            agree("{\"other\":\(value),\"iat\":1}")
        }
    }

    @Test func escapesAndUnicodeInStringsAgree() {
        for value in [
            #""G\u0045T""#, #""https:\/\/a.example\/p""#, #""\"""#, #""a\\b""#, #""\n""#, #""\ud83d\ude00""#,
            #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\u12""#, #""\x""#, "\"é😀\"", "\"\u{7F}\"", "\"\t\"",
            "\"abc",
        ] {
            for name in Self.names { agree("{\"\(name)\":\(value)}") }
            agree("{\"other\":\(value),\"jti\":\"j\"}")
        }
        let q = UInt8(ascii: "\"")
        for string: [UInt8] in [[q, 0xC0, 0x80, q], [q, 0xE0, 0x80, 0xAF, q], [q, 0xED, 0xA0, 0x80, q],
                                [q, 0xF4, 0x90, 0x80, 0x80, q], [q, 0xFF, q], [q, 0x80, q], [q, 0xE2, 0x82, q],
                                [q, 0xC3, 0xA9, q], [q, 0xF0, 0x9F, 0x98, 0x80, q]] {
            for name in Self.names + ["other"] {
                agree(Array("{\"\(name)\":".utf8) + string + Array("}".utf8))
            }
            agree(Array("{".utf8) + string + Array(":1,\"jti\":\"j\"}".utf8))  // as a name
        }
        agree([0xEF, 0xBB, 0xBF] + Array("{}".utf8))  // BOM
    }

    @Test func nestingAndStructureAgree() {
        let deep = String(repeating: "[", count: 31) + "1" + String(repeating: "]", count: 31)
        let deeper = String(repeating: "[", count: 32) + "1" + String(repeating: "]", count: 32)
        for text in ["", " ", "{", "}", "{} x", "{}{}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{,}", "[]", "\"s\"",
                     "1", "null", "{}", " {} ", "\t{\n}\r", "{\"jti\":\"j\"}\u{0}", "{\"jti\"\n:\n\"j\"\n}",
                     "{\"x\":\(deep)}", "{\"x\":\(deeper)}", "{\"jti\":\(deep)}", "{\"jti\":\(deeper)}",
                     #"{"htm":{"htm":{"htm":"GET"}}}"#, "{jti:1}", "{'jti':1}"] {
            agree(text)
        }
        agree(#"{"jti":[]}"#, maxDepth: 1)
        agree(#"{"x":[]}"#, maxDepth: 1)
        agree("{}", maxDepth: 0)
        let big = Array(("{\"jti\":\"" + String(repeating: "a", count: 100) + "\"}").utf8)
        agree(big, maxBytes: 50)
        agree(big, maxBytes: big.count)
    }

    /// Random edits of a real payload (a fixed seed, so a failure repeats): both parsers agree on every one.
    @Test func editedPayloadsAgree() {
        let base = Array(#"{"jti":"e1j3V_bKic8-LAEB","htm":"GET","htu":"https://a.example/p?q","iat":1562262616,"ath":"fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo","n":{"a":[1,2.5,"\u00e9"]}}"#.utf8)
        let alphabet = Array(#"{}[]":,\u0123456789abcdefjtihm .-+eE"#.utf8) + [0x00, 0x0A, 0x7F, 0x80, 0xC3, 0xA9, 0xFF]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(truncatingIfNeeded: state >> 1)
        }
        for _ in 0..<3000 {
            var edited = base
            for _ in 0..<(1 + next() % 3) {
                let at = next() % edited.count
                switch next() % 3 {
                case 0: edited[at] = alphabet[next() % alphabet.count]
                case 1: edited.insert(alphabet[next() % alphabet.count], at: at)
                default: if edited.count > 1 { edited.remove(at: at) }
                }
            }
            agree(edited)
        }
    }
}
