import AppCheck
import ReplayStores

/// The verified-token cache of one event loop (docs/behaviour.md): tokens whose signature verified, keyed by the
/// whole token (see `Key`), until their `exp` plus skew. A hit skips parsing and the RSA verify; the time and
/// claim checks still run on every hit. Bounded: when full, expired entries go first, then the oldest.
///
/// One per loop, so no lock: a client's repeated token normally arrives on one connection and so one loop.
public final class TokenCache {
    /// 128 bits standing for "this exact token text", unpredictable to a client: NH, UMAC's universal hash, over the
    /// token with two independent random keys, then keyed SipHash-1-3 (128-bit output) over the two NH sums and the
    /// length (`TokenHash`). A hit costs about a third of hashing the whole token with SipHash (which went through
    /// the ~900-byte token at ~23 instructions per 8 bytes) and a small fraction of SHA-256 (~18,000). Finding a token
    /// that collides with a cached one without the per-process keys is infeasible: each NH sum collides for two
    /// distinct equal-length inputs with probability at most 2^-64 over its key, the two keys are independent, the
    /// length is hashed with them, and what a client can observe (hit or miss) tells it nothing about the keys.
    public struct Key: Hashable {
        public var a: UInt64, b: UInt64

        public init(token: [UInt8]) {
            (a, b) = token.withUnsafeBytes { TokenHash.hash($0) }
        }

        public init(token: UnsafeRawBufferPointer) {
            (a, b) = TokenHash.hash(token)
        }

        /// `a` alone feeds the dictionary's hasher: it is already a keyed, uniform 64-bit value.
        public func hash(into hasher: inout Hasher) { hasher.combine(a) }
    }

    /// An entry verified against Firebase's key set while no other set (own issuer, trusted issuers) was in use keeps
    /// that loop key set (`LoopKeys`, immutable): while the same object is still the loop's set and usable, the hit
    /// needs no look-up of its `kid` (the set holds it; it verified the signature). Held strongly, so its identity can
    /// never be taken by a newer set.
    ///
    /// A class: a hit hands out one reference (one retain) where a struct was copied field by field, its strings
    /// and claims retained one by one, about five times per request on the way to the claim checks.
    public final class Entry {
        public let claims: TokenClaims
        public let kid: String
        /// `token_sha256` for logs (first 16 hex chars of SHA-256), computed once, and only while access logs are on.
        public var fingerprint: String?
        /// Unix seconds after which the entry is useless (`exp + clock_skew`).
        public let until: Double
        /// The Firebase key set that verified it, when that was the only set in use (see above); nil otherwise.
        public let verifiedBy: LoopKeys?
        /// The `ath` a DPoP proof for a bound token must carry (base64url(SHA-256(token)), SPEC §4.4): computed at the
        /// token's first proof and kept, so a hit does not hash the ~900-byte token again (~24,000 instructions).
        public var ath: String? = nil

        public init(claims: TokenClaims, kid: String, fingerprint: String?, until: Double, verifiedBy: LoopKeys? = nil) {
            self.claims = claims
            self.kid = kid
            self.fingerprint = fingerprint
            self.until = until
            self.verifiedBy = verifiedBy
        }
    }

    public let capacity: Int
    private var map: [Key: Entry] = [:]
    private var order: [Key] = []
    private var head = 0

    public init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    public var count: Int { map.count }

    public func get(_ key: Key, now: Double) -> Entry? {
        guard let e = map[key] else { return nil }
        if e.until <= now {
            map.removeValue(forKey: key)
            return nil
        }
        return e
    }

    public func setFingerprint(_ key: Key, _ fingerprint: String) {
        map[key]?.fingerprint = fingerprint
    }

    public func setATH(_ key: Key, _ ath: String) {
        map[key]?.ath = ath
    }

    public func put(_ key: Key, _ entry: Entry, now: Double) {
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

/// The verified-token cache's key function (see `TokenCache.Key`): NH (Black, Halevi, Krawczyk, Krovetz and Rogaway,
/// "UMAC: Fast and Secure Message Authentication", 1999) with 64-bit words, `sum += (m[2i] + k[2i]) * (m[2i+1] +
/// k[2i+1])` as a full 128-bit product summed mod 2^128, over the bytes zero-padded to 16, once with each of two
/// independent random keys; then SipHash-1-3-128 of the two sums and the byte count. Inputs longer than the keys
/// cover (`maxBytes`, the longest token the gateway accepts) go through SipHash whole.
public enum TokenHash {
    public static let maxBytes = AppCheckToken.maxLength
    /// Key words per NH instance: two per 16-byte block.
    private static let wordsPerKey = (maxBytes + 15) / 16 * 2

    /// Both NH keys (instance 1 in the first `wordsPerKey` words, instance 2 in the next), then the SipHash key.
    private static let keys: (nh: [UInt64], sip: (UInt64, UInt64)) = {
        var g = SystemRandomNumberGenerator()
        return ((0..<(2 * wordsPerKey)).map { _ in g.next() }, (g.next(), g.next()))
    }()

    public static func hash(_ bytes: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
        let keys = Self.keys
        let count = bytes.count
        guard count <= maxBytes, let base = bytes.baseAddress else {
            return SipHash.hash128(bytes, key: keys.sip, compressionRounds: 1, finalizationRounds: 3)
        }
        var lo1: UInt64 = 0, hi1: UInt64 = 0, lo2: UInt64 = 0, hi2: UInt64 = 0
        keys.nh.withUnsafeBufferPointer { k in
            let k2 = k.baseAddress! + wordsPerKey
            let k1 = k.baseAddress!
            @inline(__always) func block(_ m0: UInt64, _ m1: UInt64, _ w: Int) {
                let (h1, l1) = (m0 &+ k1[w]).multipliedFullWidth(by: m1 &+ k1[w + 1])
                let (s1, c1) = lo1.addingReportingOverflow(l1)
                lo1 = s1
                hi1 = hi1 &+ h1 &+ (c1 ? 1 : 0)
                let (h2, l2) = (m0 &+ k2[w]).multipliedFullWidth(by: m1 &+ k2[w + 1])
                let (s2, c2) = lo2.addingReportingOverflow(l2)
                lo2 = s2
                hi2 = hi2 &+ h2 &+ (c2 ? 1 : 0)
            }
            var offset = 0, w = 0
            while offset + 16 <= count {
                block(UInt64(littleEndian: (base + offset).loadUnaligned(as: UInt64.self)),
                      UInt64(littleEndian: (base + offset + 8).loadUnaligned(as: UInt64.self)), w)
                offset += 16
                w += 2
            }
            if offset < count {
                var tail: (UInt64, UInt64) = (0, 0)
                withUnsafeMutableBytes(of: &tail) { t in
                    t.baseAddress!.copyMemory(from: base + offset, byteCount: count - offset)
                }
                block(UInt64(littleEndian: tail.0), UInt64(littleEndian: tail.1), w)
            }
        }
        var summary: (UInt64, UInt64, UInt64, UInt64, UInt64) =
            (lo1.littleEndian, hi1.littleEndian, lo2.littleEndian, hi2.littleEndian, UInt64(count).littleEndian)
        return withUnsafeBytes(of: &summary) {
            SipHash.hash128($0, key: keys.sip, compressionRounds: 1, finalizationRounds: 3)
        }
    }
}
