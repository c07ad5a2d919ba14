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
