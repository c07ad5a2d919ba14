import AppCheck

/// The verified-token cache of one event loop (SPEC §4.3): tokens whose signature verified, by SHA-256
/// of the whole token, until their `exp` plus skew. A hit skips parsing and the RSA verify; the time and
/// claim checks still run on every hit. Bounded: when full, expired entries go first, then the oldest.
///
/// One per loop, so no lock: a client's repeated token normally arrives on one connection and so one loop.
final class TokenCache {
    struct Key: Hashable {
        var a: UInt64, b: UInt64, c: UInt64, d: UInt64

        init(_ digest: [UInt8]) {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &words) { w in
                digest.withUnsafeBytes { src in w.copyMemory(from: UnsafeRawBufferPointer(rebasing: src.prefix(32))) }
            }
            (a, b, c, d) = words
        }
    }

    struct Entry {
        var claims: TokenClaims
        var kid: String
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
