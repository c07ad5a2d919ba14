import AppCheck

/// The verified-token cache of one event loop (docs/behaviour.md): tokens whose signature verified, keyed by the
/// whole token (see `Key`), until their `exp` plus skew. A hit skips parsing and the RSA verify; the time and
/// claim checks still run on every hit. Bounded: when full, expired entries go first, then the oldest.
///
/// One per loop, so no lock: a client's repeated token normally arrives on one connection and so one loop.
final class TokenCache {
    /// 128 bits of keyed SipHash-1-3 (the 128-bit-output variant, one pass) over the whole token, with a random
    /// per-process key, so the output is unpredictable to a client: a hit costs a few thousand instructions where
    /// SHA-256 of a ~900-byte token costs ~18,000. Finding a token that collides with a cached one without the
    /// key is infeasible, so the key stands for "this exact token text" as SHA-256 would.
    struct Key: Hashable {
        var a: UInt64, b: UInt64

        private static let seeds: (UInt64, UInt64) = {
            var g = SystemRandomNumberGenerator()
            return (g.next(), g.next())
        }()

        init(token: [UInt8]) {
            (a, b) = token.withUnsafeBytes { SipHash128.hash($0, key: Self.seeds) }
        }

        init(token: UnsafeRawBufferPointer) {
            (a, b) = SipHash128.hash(token, key: Self.seeds)
        }
    }

    struct Entry {
        var claims: TokenClaims
        var kid: String
        /// `token_sha256` for logs (first 16 hex chars of SHA-256), computed once, and only while access logs are on.
        var fingerprint: String?
        /// Unix seconds after which the entry is useless (`exp + clock_skew`).
        var until: Double
    }

    let capacity: Int
    private var map: [Key: Entry] = [:]
    private var order: [Key] = []
    private var head = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { map.count }

    func get(_ key: Key, now: Double) -> Entry? {
        guard let e = map[key] else { return nil }
        if e.until <= now {
            map.removeValue(forKey: key)
            return nil
        }
        return e
    }

    func setFingerprint(_ key: Key, _ fingerprint: String) {
        map[key]?.fingerprint = fingerprint
    }

    func put(_ key: Key, _ entry: Entry, now: Double) {
        guard capacity > 0 else { return }
        if map[key] != nil { map[key] = entry; return }
        if map.count >= capacity { evict(now: now) }
        map[key] = entry
        order.append(key)
        if head > 4096 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Drops expired entries from the old end, and at least one entry.
    private func evict(now: Double) {
        var removed = 0
        while head < order.count {
            let k = order[head]
            head += 1
            guard let e = map[k] else { continue }
            if e.until <= now || removed == 0 {
                map.removeValue(forKey: k)
                removed += 1
                if e.until > now { break }
            } else {
                head -= 1
                break
            }
        }
    }
}

/// SipHash-1-3 with 128-bit output (Aumasson and Bernstein, "SipHash: a fast short-input PRF", the 128-bit variant
/// of the reference implementation: `v1 ^= 0xee` at the start, `v2 ^= 0xee` and `v1 ^= 0xdd` before the two
/// finalisations). One compression round per word and three per finalisation, as Swift's `Hasher` uses.
enum SipHash128 {
    @inline(__always)
    private static func round(_ v0: inout UInt64, _ v1: inout UInt64, _ v2: inout UInt64, _ v3: inout UInt64) {
        v0 = v0 &+ v1; v1 = v1.rotatedLeft(13); v1 ^= v0; v0 = v0.rotatedLeft(32)
        v2 = v2 &+ v3; v3 = v3.rotatedLeft(16); v3 ^= v2
        v0 = v0 &+ v3; v3 = v3.rotatedLeft(21); v3 ^= v0
        v2 = v2 &+ v1; v1 = v1.rotatedLeft(17); v1 ^= v2; v2 = v2.rotatedLeft(32)
    }

    /// SipHash-c-d-128 of `bytes`; the cache uses c = 1, d = 3 (the tests check c = 2, d = 4 against the
    /// reference vectors).
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer, key: (UInt64, UInt64),
                     compressionRounds c: Int = 1, finalizationRounds d: Int = 3) -> (UInt64, UInt64) {
        var v0: UInt64 = key.0 ^ 0x736f_6d65_7073_6575
        var v1: UInt64 = key.1 ^ 0x646f_7261_6e64_6f6d ^ 0xee
        var v2: UInt64 = key.0 ^ 0x6c79_6765_6e65_7261
        var v3: UInt64 = key.1 ^ 0x7465_6462_7974_6573
        let count = bytes.count
        var offset = 0
        if let base = bytes.baseAddress {
            while offset + 8 <= count {
                let m = UInt64(littleEndian: (base + offset).loadUnaligned(as: UInt64.self))
                v3 ^= m
                for _ in 0..<c { round(&v0, &v1, &v2, &v3) }
                v0 ^= m
                offset += 8
            }
        }
        var last = UInt64(truncatingIfNeeded: count) << 56
        var shift: UInt64 = 0
        while offset < count {
            last |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        v3 ^= last
        for _ in 0..<c { round(&v0, &v1, &v2, &v3) }
        v0 ^= last
        v2 ^= 0xee
        for _ in 0..<d { round(&v0, &v1, &v2, &v3) }
        let first = v0 ^ v1 ^ v2 ^ v3
        v1 ^= 0xdd
        for _ in 0..<d { round(&v0, &v1, &v2, &v3) }
        return (first, v0 ^ v1 ^ v2 ^ v3)
    }
}

private extension UInt64 {
    @inline(__always)
    func rotatedLeft(_ n: UInt64) -> UInt64 { (self << n) | (self >> (64 - n)) }
}
