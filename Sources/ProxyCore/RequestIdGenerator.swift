import EventLoop

/// Fast request ids: 32 lower-case hex characters from a per-loop xoshiro256** seeded by the system
/// generator. Unique, not secret.
public struct RequestIdGenerator {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    public init() {
        var g = SystemRandomNumberGenerator()
        s = (g.next(), g.next(), g.next(), g.next() | 1)
    }

    private mutating func next64() -> UInt64 {
        let result = ((s.1 &* 5) << 7 | (s.1 &* 5) >> 57) &* 9
        let t = s.1 << 17
        s.2 ^= s.0; s.3 ^= s.1; s.1 ^= s.2; s.0 ^= s.3; s.2 ^= t
        s.3 = s.3 << 45 | s.3 >> 19
        return result
    }

    /// The 128 random bits of a new id (written as 32 hex digits by `RequestID`).
    public mutating func nextBits() -> (UInt64, UInt64) { (next64(), next64()) }

    public mutating func next() -> String { Self.string(nextBits()) }

    /// The 32 lower-case hex digits of `bits`, high nibble first.
    public static func string(_ bits: (UInt64, UInt64)) -> String {
        var (a, b) = bits
        // Written straight into the string's storage: no table or scratch array per request.
        return String(unsafeUninitializedCapacity: 32) { out in
            for i in 0..<16 { out[15 - i] = Self.hexDigit(a & 0xF); a >>= 4 }
            for i in 0..<16 { out[31 - i] = Self.hexDigit(b & 0xF); b >>= 4 }
            return 32
        }
    }

    /// The same 32 digits appended to `out` in place: no string per request.
    public static func append(_ bits: (UInt64, UInt64), to out: IOBuffer) {
        out.reserve(32)
        write(bits, to: out.writable.baseAddress!.assumingMemoryBound(to: UInt8.self))
        out.didWrite(32)
    }

    /// The same 32 digits written at `p` (32 bytes).
    @inline(__always)
    public static func write(_ bits: (UInt64, UInt64), to p: UnsafeMutablePointer<UInt8>) {
        var (a, b) = bits
        for i in 0..<16 { p[15 - i] = hexDigit(a & 0xF); a >>= 4 }
        for i in 0..<16 { p[31 - i] = hexDigit(b & 0xF); b >>= 4 }
    }

    @inline(__always)
    private static func hexDigit(_ v: UInt64) -> UInt8 {
        let digits: StaticString = "0123456789abcdef"
        return digits.utf8Start[Int(v & 0xF)]
    }
}
