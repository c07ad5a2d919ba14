import AppCheck

/// The verified-token cache of one event loop (docs/behaviour.md): tokens whose signature verified, keyed by the
/// whole token (see `Key`), until their `exp` plus skew. A hit skips parsing and the RSA verify; the time and
/// claim checks still run on every hit. Bounded: when full, expired entries go first, then the oldest.
///
/// One per loop, so no lock: a client's repeated token normally arrives on one connection and so one loop.
final class TokenCache {
    /// 128 bits of keyed SipHash over the whole token (two `Hasher`s, whose per-process random seed plus ours
    /// make the output unpredictable to a client): a hit costs a few hundred instructions where SHA-256 of
    /// a ~900-byte token costs ~18,000. Finding a token that collides with a cached one without the keys is
    /// infeasible, so the key stands for "this exact token text" as SHA-256 would.
    struct Key: Hashable {
        var a: UInt64, b: UInt64

        private static let seeds: (UInt64, UInt64) = {
            var g = SystemRandomNumberGenerator()
            return (g.next(), g.next())
        }()

        init(token: [UInt8]) {
            var h1 = Hasher()
            var h2 = Hasher()
            h1.combine(Self.seeds.0)
            h2.combine(Self.seeds.1)
            token.withUnsafeBytes { bytes in
                h1.combine(bytes: bytes)
                h2.combine(bytes: bytes)
            }
            a = UInt64(bitPattern: Int64(h1.finalize()))
            b = UInt64(bitPattern: Int64(h2.finalize()))
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
