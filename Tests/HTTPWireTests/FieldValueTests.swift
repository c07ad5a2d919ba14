import Testing
@testable import HTTPWire

/// `HTTPSyntax.isFieldValue` (eight bytes at a time) agrees with the byte rule everywhere.
@Suite struct FieldValueTests {
    @Test func wordAtATimeCheckAgreesWithTheByteRuleForEveryByteAtEveryPosition() {
        for length in 1...19 {
            for position in 0..<length {
                for byte in 0...255 {
                    var value = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    value[position] = UInt8(byte)
                    let expected = HTTPSyntax.isFieldValueByte(UInt8(byte))
                    let got = value.withUnsafeBytes { HTTPSyntax.isFieldValue($0) }
                    if got != expected {
                        Issue.record("length \(length), position \(position), byte \(byte): \(got)")
                        return
                    }
                }
            }
        }
        #expect([UInt8]().withUnsafeBytes { HTTPSyntax.isFieldValue($0) })
    }
}

/// The head scanner skips ordinary bytes eight at a time: a line break or control byte is still caught at every
/// position of a long header value, on either side of a word boundary.
@Suite struct HeadScannerWordScanTests {
    @Test func controlBytesAreFoundAtEveryPositionOfALongValue() {
        let value = Array(String(repeating: "abcdefghij", count: 4).utf8)
        let cases: [(UInt8, HTTPParseError)] = [
            (0x0A, .badRequest("bare_lf")), (0x0D, .badRequest("bare_cr")), (0x00, .badRequest("invalid_field_value")),
            (0x01, .badRequest("invalid_field_value")), (0x0C, .badRequest("invalid_field_value")),
        ]
        for position in value.indices {
            for (byte, expected) in cases {
                var bad = value
                bad[position] = byte
                let request = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Long: ") + bad + bytes("\r\n\r\n")
                var parser = HTTPRequestHeadParser()
                let result = request.withUnsafeBytes { parser.parse($0) }
                if result.error != expected {
                    Issue.record("byte \(byte) at \(position): \(String(describing: result))")
                    return
                }
            }
        }
        let good = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Long: ") + value + bytes("\r\n\r\n")
        #expect(parseRequest(good).head?.headers.firstValue(forLowercased: "x-long") == String(decoding: value, as: UTF8.self))
    }

    /// The scanner's word pass decides whether a value needs its own byte check: every byte value, at every position
    /// across two word boundaries of a long value, gets exactly the verdict of the field-value rule (RFC 9110 §5.5).
    @Test func everyByteValueGetsTheFieldValueVerdictAtEveryPosition() {
        let value = Array(String(repeating: "abcdefghij", count: 3).utf8)
        for position in 1..<(value.count - 1) {
            for byte in 0...255 {
                var line = value
                line[position] = UInt8(byte)
                let request = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Long: ") + line + bytes("\r\n\r\n")
                var parser = HTTPRequestHeadParser()
                let result = request.withUnsafeBytes { parser.parse($0) }
                let expected: HTTPParseError?
                switch UInt8(byte) {
                case 0x0A: expected = .badRequest("bare_lf")
                case 0x0D: expected = .badRequest("bare_cr")
                case let b where !HTTPSyntax.isFieldValueByte(b): expected = .badRequest("invalid_field_value")
                default: expected = nil
                }
                if result.error != expected || (expected == nil && result.head == nil) {
                    Issue.record("byte \(byte) at \(position): \(String(describing: result))")
                    return
                }
                if expected == nil, result.head?.headers.withValueBytes(at: 1, { Array($0) }) != line {
                    Issue.record("byte \(byte) at \(position): value not kept byte-exact")
                    return
                }
            }
        }
    }

    /// A control byte or DEL in an earlier line does not leak its verdict into a later clean line, and a later bad
    /// line is caught after a clean one.
    @Test func lineVerdictsAreIndependent() {
        let tab = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\tb\r\nX-B: clean-value-long-enough\r\n\r\n")
        #expect(parseRequest(tab).head?.headers.firstValue(forLowercased: "x-b") == "clean-value-long-enough")
        let del = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-A: clean-value-long-enough\r\nX-B: ab\u{7F}cdefghijkl\r\n\r\n")
        var parser = HTTPRequestHeadParser()
        #expect(del.withUnsafeBytes { parser.parse($0) }.error == .badRequest("invalid_field_value"))
    }
}
