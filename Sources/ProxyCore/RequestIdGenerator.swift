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
        // Written straight into the string's storage: no table or scratch array per request.
        String(unsafeUninitializedCapacity: 32) { out in
            guard let base = out.baseAddress, out.count >= 32 else { return 0 }
            write(bits, to: base)
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
        let raw = UnsafeMutableRawPointer(p)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.0 >> 32)), toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.0)), toByteOffset: 8, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.1 >> 32)), toByteOffset: 16, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.1)), toByteOffset: 24, as: UInt64.self)
    }

    /// The 8 lower-case hex digits of `x`, high nibble first, as the bytes of a word to store (eight digits in a
    /// dozen word operations instead of a table look-up, a shift and a store per digit: two ids per request).
    @inline(__always)
    public static func hexWord(_ x: UInt32) -> UInt64 {
        // Nibble k of `x` (k = 0 the lowest) into the low half of byte k.
        var v = UInt64(x)
        v = (v | v << 16) & 0x0000_FFFF_0000_FFFF
        v = (v | v << 8) & 0x00FF_00FF_00FF_00FF
        v = (v | v << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Each byte n (0...15) to ASCII: `0` + n, plus 39 more (to `a`) where n >= 10, i.e. where n + 6 reaches 16.
        // No byte carries into the next: every intermediate byte stays below 0x80.
        let letters = ((v &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        let ascii = v &+ 0x3030_3030_3030_3030 &+ letters &* 39
        // Byte 0 (the lowest nibble) must land last in memory.
        return ascii.byteSwapped.littleEndian
    }
}
