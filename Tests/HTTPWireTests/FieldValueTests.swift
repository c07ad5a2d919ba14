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
}
