import AppCheck
import Testing

@Suite struct ES256SignatureTests {
    static let n: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    let r = [UInt8](repeating: 0x11, count: 32)

    @Test func lowSIsUnchanged() {
        var s = [UInt8](repeating: 0, count: 32)
        s[31] = 5
        #expect(ES256Signature.lowS(r + s) == r + s)
        #expect(!ES256Signature.isHighS(r + s))
    }

    @Test func highSBecomesNMinusS() {
        // s = n − 5 → 5.
        var s = Self.n
        s[31] -= 5
        var five = [UInt8](repeating: 0, count: 32)
        five[31] = 5
        #expect(ES256Signature.isHighS(r + s))
        #expect(ES256Signature.lowS(r + s) == r + five)
        // A borrow across every byte: s = n − 0x100 → 0x100.
        var t = Self.n
        t[30] -= 1
        var expected = [UInt8](repeating: 0, count: 32)
        expected[30] = 1
        #expect(ES256Signature.lowS(r + t) == r + expected)
    }

    @Test func bothTwinsNormaliseToOne() {
        for seed in 1...50 {
            var s = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* seed &+ 7) }
            s[0] = 0x10   // below n / 2
            // n − s
            var twin = [UInt8](repeating: 0, count: 32)
            var borrow = 0
            for i in stride(from: 31, through: 0, by: -1) {
                var d = Int(Self.n[i]) - Int(s[i]) - borrow
                borrow = d < 0 ? 1 : 0
                if d < 0 { d += 256 }
                twin[i] = UInt8(d)
            }
            #expect(ES256Signature.lowS(r + twin) == r + s)
            #expect(ES256Signature.lowS(r + s) == r + s)
        }
    }

    @Test func otherLengthsPassThrough() {
        #expect(ES256Signature.lowS([1, 2, 3]) == [1, 2, 3])
    }
}
