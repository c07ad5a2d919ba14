/// SipHash-c-d (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed hash of short inputs, in
/// its 64-bit form and its 128-bit form (the paper's reference implementation's double output). SipHash-1-3-128, each
/// under a secret key of its own drawn at start, keys the memory replay store's tokens with a `jti`
/// (`MemoryReplayStore.tokenIDKey`) and finishes the verified-token cache's key (`ProxyCore.TokenHash`); the tests
/// check SipHash-2-4 against the reference vectors. Inlinable: the proxy's hot path calls it once per request.
public enum SipHash {
    /// The 64-bit SipHash-c-d of `bytes` under `key` (the key's bytes 0–7 and 8–15, little-endian); c = 2, d = 4 by
    /// default, the paper's SipHash-2-4.
    @inlinable
    public static func hash64(_ bytes: UnsafeRawBufferPointer, key: (UInt64, UInt64), compressionRounds c: Int = 2,
                       finalizationRounds d: Int = 4) -> UInt64 {
        var state = State(key: key, wide: false)
        state.absorb(bytes, rounds: c)
        return state.finish(wide: false, rounds: d).0
    }

    /// The 128-bit SipHash-c-d of `bytes` under `key`: its two 64-bit halves, first and second. Always inlined: the
    /// callers pass constant round counts, which then unroll (a call kept them as loop counters, about 60 instructions
    /// more for a 58-byte input).
    @inlinable @inline(__always)
    public static func hash128(_ bytes: UnsafeRawBufferPointer, key: (UInt64, UInt64), compressionRounds c: Int = 2,
                        finalizationRounds d: Int = 4) -> (UInt64, UInt64) {
        var state = State(key: key, wide: true)
        state.absorb(bytes, rounds: c)
        return state.finish(wide: true, rounds: d)
    }

    @usableFromInline
    struct State {
        @usableFromInline var v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64

        @inlinable
        init(key: (UInt64, UInt64), wide: Bool) {
            v0 = key.0 ^ 0x736F_6D65_7073_6575
            v1 = key.1 ^ 0x646F_7261_6E64_6F6D ^ (wide ? 0xEE : 0)
            v2 = key.0 ^ 0x6C79_6765_6E65_7261
            v3 = key.1 ^ 0x7465_6462_7974_6573
        }

        @inlinable @inline(__always)
        mutating func round() {
            v0 = v0 &+ v1; v1 = v1.sipRotatedLeft(13); v1 ^= v0; v0 = v0.sipRotatedLeft(32)
            v2 = v2 &+ v3; v3 = v3.sipRotatedLeft(16); v3 ^= v2
            v0 = v0 &+ v3; v3 = v3.sipRotatedLeft(21); v3 ^= v0
            v2 = v2 &+ v1; v1 = v1.sipRotatedLeft(17); v1 ^= v2; v2 = v2.sipRotatedLeft(32)
        }

        @inlinable @inline(__always)
        mutating func compress(_ word: UInt64, rounds: Int) {
            v3 ^= word
            for _ in 0..<rounds { round() }
            v0 ^= word
        }

        /// Every whole eight-byte word of `bytes`, then the last one: the remaining bytes and the length's low byte.
        /// With eight bytes or more, the remaining ones are read as the top of the input's last eight (one load
        /// and a shift, not a loop of single bytes).
        @inlinable @inline(__always)
        mutating func absorb(_ bytes: UnsafeRawBufferPointer, rounds: Int) {
            let count = bytes.count
            var last = UInt64(truncatingIfNeeded: count) << 56
            guard let base = bytes.baseAddress else { return compress(last, rounds: rounds) }
            var i = 0
            while i &+ 8 <= count {
                compress(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)), rounds: rounds)
                i &+= 8
            }
            let rest = count &- i
            if rest > 0 && count >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self))
                last |= word >> UInt64(truncatingIfNeeded: 8 &* (8 &- rest))
            } else {
                var shift: UInt64 = 0
                while i < count {
                    last |= UInt64(base.load(fromByteOffset: i, as: UInt8.self)) << shift
                    shift &+= 8
                    i &+= 1
                }
            }
            compress(last, rounds: rounds)
        }

        @inlinable @inline(__always)
        mutating func finish(wide: Bool, rounds: Int) -> (UInt64, UInt64) {
            v2 ^= wide ? 0xEE : 0xFF
            for _ in 0..<rounds { round() }
            let first = v0 ^ v1 ^ v2 ^ v3
            guard wide else { return (first, 0) }
            v1 ^= 0xDD
            for _ in 0..<rounds { round() }
            return (first, v0 ^ v1 ^ v2 ^ v3)
        }
    }
}

extension UInt64 {
    @inlinable @inline(__always)
    func sipRotatedLeft(_ n: UInt64) -> UInt64 { self << n | self >> (64 - n) }
}
