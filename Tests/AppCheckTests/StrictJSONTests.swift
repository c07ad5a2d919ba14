import Testing
@testable import AppCheck

@Suite struct StrictJSONTests {
    private func parse(_ text: String) -> JSONValue? { try? StrictJSON.parse(Array(text.utf8)) }
    private func error(_ bytes: [UInt8]) -> StrictJSON.ParseError.Kind? {
        do { _ = try StrictJSON.parse(bytes); return nil } catch { return error.kind }
    }
    private func error(_ text: String) -> StrictJSON.ParseError.Kind? { error(Array(text.utf8)) }

    @Test func parsesEveryKindInOrder() throws {
        let value = try #require(parse(#" { "b" : [1, -2.5, 3e2, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"], "a" : {} } "#))
        let members = try #require(value.objectMembers)
        #expect(members.map(\.key) == ["b", "a"])
        #expect(value.member("a") == .object([]))
        let array = try #require(value.member("b")?.arrayValue)
        #expect(array[0] == .number(1, isInteger: true))
        #expect(array[1] == .number(-2.5, isInteger: false))
        #expect(array[2] == .number(300, isInteger: false))
        #expect(array[3] == .bool(true))
        #expect(array[4] == .bool(false))
        #expect(array[5] == .null)
        #expect(array[6] == .string("x\"\\/\u{08}\u{0C}\n\r\té😀"))
        #expect(parse("0") == .number(0, isInteger: true))
        #expect(parse("-0") == .number(0, isInteger: true))
        #expect(parse("\"é😀\"") == .string("é😀"))
    }

    @Test func rejectsDuplicateKeysAnywhere() {
        #expect(error(#"{"a":1,"a":2}"#) == .duplicateKey)
        #expect(error(#"{"a":1,"\u0061":2}"#) == .duplicateKey)
        #expect(error(#"{"x":[{"k":1,"k":1}]}"#) == .duplicateKey)
        #expect(error(#"{"a":{"b":1},"c":{"b":1}}"#) == nil)
    }

    /// Integers of every length from 1 to 20 digits, with and without a sign, alone, inside an array and followed by a
    /// fraction, an exponent or a foreign byte at every position: the value is the text's (`Double(String)`), and every
    /// foreign byte is refused, whether it falls among the eight digits read at once or after them.
    @Test func integersOfEveryLength() {
        var seed: UInt64 = 0x2545_F491_4F6C_DD1D
        func digit() -> UInt8 {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(ascii: "0") + UInt8((seed >> 33) % 10)
        }
        for length in 1...20 {
            var digits = (0..<length).map { _ in digit() }
            if digits[0] == UInt8(ascii: "0") { digits[0] = UInt8(ascii: "7") }
            for sign in ["", "-"] {
                let text = sign + String(decoding: digits, as: UTF8.self)
                #expect(parse(text) == .number(Double(text)!, isInteger: true), "\(text)")
                #expect(parse("[\(text),1]") == .array([.number(Double(text)!, isInteger: true), .number(1, isInteger: true)]))
                #expect(parse(text + ".25") == .number(Double(text + ".25")!, isInteger: false), "\(text).25")
                #expect(parse(text + "e2") == .number(Double(text + "e2")!, isInteger: false), "\(text)e2")
                for position in 1..<length {
                    for foreign in ["/", ":", "a", "-", "+", "\u{0}", "é"] {  // (a space last would be whitespace after the number)
                        var bad = digits
                        bad[position] = Array(foreign.utf8)[0]
                        let badText = sign + String(decoding: bad, as: UTF8.self)
                        #expect(parse(badText) == nil, "\(badText)")
                    }
                }
            }
        }
        #expect(parse("12345678") == .number(12_345_678, isInteger: true))
        #expect(parse("99999999") == .number(99_999_999, isInteger: true))
        #expect(parse("10000000000") == .number(10_000_000_000, isInteger: true))
        #expect(parse("1764000000") == .number(1_764_000_000, isInteger: true))
        #expect(parse("012345678") == nil)
    }

    @Test(arguments: ["01", "-01", "+1", ".5", "1.", "1.e3", "1e", "1e+", "-", "--1", "0x10", "1e999", "-1e999",
                      "NaN", "Infinity"])
    func rejectsBadNumbers(_ text: String) {
        #expect(error(text) != nil)
    }

    @Test(arguments: ["", " ", "{", "}", "[1,]", "{\"a\":1,}", "{a:1}", "{'a':1}", "{\"a\" 1}", "[1 2]", "tru",
                      "nul", "{} x", "{}{}", "[] ,", "/*c*/{}", "{}//", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\t\"",
                      "\"a\nb\"", "{\"a\":1}\u{0}"])
    func rejectsBadSyntax(_ text: String) {
        #expect(error(text) != nil)
    }

    @Test func rejectsInvalidUnicode() {
        let q = UInt8(ascii: "\"")
        #expect(error([q, 0xC0, 0x80, q]) == .invalidUnicode)            // overlong NUL
        #expect(error([q, 0xE0, 0x80, 0xAF, q]) == .invalidUnicode)      // overlong
        #expect(error([q, 0xED, 0xA0, 0x80, q]) == .invalidUnicode)      // UTF-8 encoded surrogate
        #expect(error([q, 0xF4, 0x90, 0x80, 0x80, q]) == .invalidUnicode) // above U+10FFFF
        #expect(error([q, 0xFF, q]) == .invalidUnicode)
        #expect(error([q, 0x80, q]) == .invalidUnicode)                  // lone continuation
        #expect(error([q, 0xE2, 0x82, q]) == .invalidUnicode)            // truncated
        #expect(error(#""\ud800""#) == .invalidUnicode)
        #expect(error(#""\udc00""#) == .invalidUnicode)
        #expect(error(#""\ud800\u0041""#) == .invalidUnicode)
        #expect(error(#""\ud800x""#) == .invalidUnicode)
        #expect(error([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .syntax)  // BOM
        #expect(error([0x7B, 0xC3, 0xA9, 0x7D]) == .syntax)              // non-ASCII outside a string
    }

    @Test func boundsDepthAndSize() {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(error(ok) == nil)
        #expect(error(deep) == .tooDeep)
        #expect(error(String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40)) == .tooDeep)
        let big = Array(("\"" + String(repeating: "a", count: 100) + "\"").utf8)
        #expect(throws: StrictJSON.ParseError.self) { try StrictJSON.parse(big, maxBytes: 50) }
        #expect((try? StrictJSON.parse(big, maxBytes: 102)) != nil)
    }
}
