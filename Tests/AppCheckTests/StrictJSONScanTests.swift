import Testing
@testable import AppCheck

/// `StrictJSON.scanObject` (the token parser's one pass) accepts exactly the objects `StrictJSON.parse` accepts, and
/// keeps the same values.
@Suite struct StrictJSONScanTests {
    /// Slots by name: the claim names of `TokenClaims`.
    private static func slot(_ key: JSONValue.ShortKey?) -> Int { TokenClaims.claimSlot(key) }

    /// The verdict of both parsers on `bytes`; records a mismatch.
    private func agree(_ bytes: [UInt8], maxDepth: Int = StrictJSON.defaultMaxDepth,
                       maxBytes: Int = StrictJSON.defaultMaxBytes, sourceLocation: SourceLocation = #_sourceLocation) {
        let tree: JSONValue?
        var treeError: StrictJSON.ParseError.Kind? = nil
        do { tree = try StrictJSON.parse(bytes, maxDepth: maxDepth, maxBytes: maxBytes) } catch { tree = nil; treeError = error.kind }
        var slots = StrictJSON.MemberSlots()
        var scanError: StrictJSON.ParseError.Kind? = nil
        do { try StrictJSON.scanObject(bytes, maxDepth: maxDepth, maxBytes: maxBytes, into: &slots, select: Self.slot) } catch {
            scanError = error.kind
        }
        let text = String(decoding: bytes.prefix(80), as: UTF8.self)
        guard let members = tree?.objectMembers else {
            #expect(scanError != nil, "scan accepted what parse refused: \(text)", sourceLocation: sourceLocation)
            // Where the text is an object, the first fault is the same one.
            if let treeError, bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{") {
                #expect(scanError == treeError, "\(text)", sourceLocation: sourceLocation)
            }
            return
        }
        #expect(scanError == nil, "scan refused what parse accepted (\(String(describing: scanError))): \(text)",
                sourceLocation: sourceLocation)
        let kept = [slots.v0, slots.v1, slots.v2, slots.v3, slots.v4, slots.v5, slots.v6, slots.v7, slots.v8, slots.v9]
        for (index, name) in TokenClaims.claimNames.enumerated() {
            #expect(kept[index] == members.first(where: { $0.key.utf8.elementsEqual(name.utf8) })?.value,
                    "\(name) in \(text)", sourceLocation: sourceLocation)
        }
    }

    private func agree(_ text: String, maxDepth: Int = StrictJSON.defaultMaxDepth, sourceLocation: SourceLocation = #_sourceLocation) {
        agree(Array(text.utf8), maxDepth: maxDepth, sourceLocation: sourceLocation)
    }

    /// Values and faults, each tried as a kept member (`iss`), a skipped one (`other`) and alone.
    static let values: [String] = [
        "1", "-0", "0", "1.5", "-2.5e3", "1E+2", "12345678901234567890", "01", "-01", "+1", ".5", "1.", "1.e3", "1e",
        "1e+", "-", "--1", "0x10", "1e999", "-1e999", "NaN", "Infinity", "true", "false", "null", "tru", "nul",
        "\"\"", "\"plain ascii ~!@#$%^&*()\"", "\"\u{7F}\"", "\"é😀\"", #""x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00""#,
        #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\ud800x""#, #""\u12""#, #""\x""#, "\"\t\"", "\"a\nb\"",
        "\"abc", "[]", "[1,2]", "[1,]", "[1 2]", "[\"a\",\"b\"]", "[\"a\",1]", "{}", "{\"a\":1}", "{\"a\":1,\"a\":2}",
        "{\"k\":[{\"k\":1,\"k\":1}]}", "{a:1}", "{'a':1}", "/*c*/1", "1//", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    ]

    @Test func valuesAgree() {
        for value in Self.values {
            agree(value)
            agree("{\"iss\":\(value)}")
            agree("{\"other\":\(value)}")
            agree(" { \"aud\" : \(value) , \"sub\":\"s\" } ")
            agree("{\"averyverylongname\":\(value),\"exp\":1}")
        }
    }

    @Test func invalidUTF8Agrees() {
        let q = UInt8(ascii: "\"")
        let strings: [[UInt8]] = [[q, 0xC0, 0x80, q], [q, 0xE0, 0x80, 0xAF, q], [q, 0xED, 0xA0, 0x80, q],
                                  [q, 0xF4, 0x90, 0x80, 0x80, q], [q, 0xFF, q], [q, 0x80, q], [q, 0xE2, 0x82, q],
                                  [q, 0xC3, 0xA9, q], [q, 0xF0, 0x9F, 0x98, 0x80, q]]
        for string in strings {
            for name in ["iss", "other"] {
                agree(Array("{\"\(name)\":".utf8) + string + Array("}".utf8))
                agree(Array("{".utf8) + string + Array(":1}".utf8))  // as a key
            }
        }
        agree([0xEF, 0xBB, 0xBF] + Array("{}".utf8))  // BOM
        agree([0x7B, 0xC3, 0xA9, 0x7D])
        agree(Array("{\"a\":1}".utf8) + [0])
    }

    @Test func duplicateKeysAgree() {
        for text in [
            #"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, #"{"\u0061":1,"a":2}"#, #"{"iss":"x","iss":"y"}"#,
            #"{"iss":"x","i\u0073s":"y"}"#, #"{"a":1,"b":2}"#, #"{"a":1,"aa":2}"#, #"{"":1,"":2}"#, #"{"":1,"a":2}"#,
            // Canonically equivalent keys are duplicates (String equality), as in `parse`: KELVIN SIGN and K,
            // ANGSTROM SIGN and Å, GREEK QUESTION MARK and ";".
            "{\"K\":1,\"\u{212A}\":2}", "{\"\u{212A}\":1,\"K\":2}", #"{"K":1,"\u212a":2}"#, "{\"\u{C5}\":1,\"\u{212B}\":2}",
            "{\";\":1,\"\u{37E}\":2}", "{\"e\u{301}\":1,\"\u{E9}\":2}", "{\"sub\":\"a\",\"su\u{62}\":\"b\"}",
            #"{"x":{"b":1},"y":{"b":1}}"#, #"{"x":{"b":1,"b":2}}"#,
        ] {
            agree(text)
        }
        // Past the linear scan's 16 keys.
        let many = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        agree("{" + many + "}")
        agree("{" + many + ",\"k3\":1}")
        agree("{" + many + ",\"k\\u0033\":1}")
        agree("{" + many + ",\"K\":1,\"\u{212A}\":2}")
        agree("{" + many + ",\"iss\":\"i\",\"exp\":1}")
    }

    @Test func structureAgrees() {
        for text in ["", " ", "{", "}", "{} x", "{}{}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{,}", "{\"a\":1 \"b\":2}",
                     "[]", "\"s\"", "1", "null", "{}", " {} ", "\t{\n}\r", "{\"a\":1}\u{0}", "{\"a\"\n:\n1\n}",
                     "{\"iss\":\"i\",\"aud\":[\"p\"],\"sub\":\"s\",\"exp\":2,\"iat\":1,\"nbf\":0,\"jti\":\"j\",\"provider\":\"x\",\"risk\":3,\"z\":{}}"] {
            agree(text)
        }
        agree(#"{"a":[]}"#, maxDepth: 1)
        agree(#"{"a":1}"#, maxDepth: 1)
        agree("{}", maxDepth: 0)
        agree(#"{"a":[[1]]}"#, maxDepth: 2)
        agree(#"{"a":[[1]]}"#, maxDepth: 3)
        let big = Array(("{\"a\":\"" + String(repeating: "a", count: 100) + "\"}").utf8)
        agree(big, maxBytes: 50)
        agree(big, maxBytes: big.count)
    }

    /// Strings are scanned eight bytes a step: a byte that ends the plain run (a control byte, `"`, `\`, any byte from
    /// 0x80) at every offset of strings up to 24 bytes long, as a kept value, a skipped value and a key.
    @Test func everyStopByteAtEveryOffsetAgrees() {
        let stops: [[UInt8]] = [[0x00], [0x1F], [0x20], [0x21], [0x22], [0x5C, 0x6E], [0x5C, 0x78], [0x5C], [0x7E], [0x7F],
                                [0x80], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xFF], [0x09], [0x0A]]
        for length in 0..<24 {
            for offset in 0...length {
                for stop in stops {
                    let text = Array(repeating: UInt8(ascii: "a"), count: offset) + stop
                        + Array(repeating: UInt8(ascii: "b"), count: length - offset)
                    let quoted = [UInt8(ascii: "\"")] + text + [UInt8(ascii: "\"")]
                    // The value both must find (an oracle independent of the scanner they share), or nil for a
                    // refusal: a control byte, a bare `"` (the string ends early), `\x`, a `\` that escapes the
                    // closing quote, a byte that is not UTF-8.
                    var expected: [UInt8]? = text
                    switch stop {
                    case [0x00], [0x1F], [0x09], [0x0A], [0x22], [0x5C, 0x78], [0x80], [0xFF]: expected = nil
                    case [0x5C, 0x6E]: expected = Array(repeating: UInt8(ascii: "a"), count: offset) + [0x0A]
                        + Array(repeating: UInt8(ascii: "b"), count: length - offset)
                    case [0x5C]: expected = offset == length ? nil : Array(repeating: UInt8(ascii: "a"), count: offset) + [0x08]
                        + Array(repeating: UInt8(ascii: "b"), count: length - offset - 1)
                    default: break
                    }
                    let document = Array("{\"iss\":".utf8) + quoted + Array("}".utf8)
                    switch Result(catching: { () throws(StrictJSON.ParseError) in try StrictJSON.parse(document) }) {
                    case .success(let value):
                        #expect(expected.map { JSONValue.string(String(decoding: $0, as: UTF8.self)) } == value.member("iss"),
                                "accepted: length \(length), offset \(offset), stop \(stop)")
                    case .failure:
                        #expect(expected == nil, "refused: length \(length), offset \(offset), stop \(stop)")
                    }
                    agree(document)
                    agree(Array("{\"zz\":".utf8) + quoted + Array(",\"sub\":1}".utf8))
                    agree(Array("{".utf8) + quoted + Array(":1,\"iss\":2}".utf8))
                }
            }
        }
    }
}
