import EventLoop
import Synchronization

/// `replay.store: memory` — single process, lost on restart. Single use still holds across a restart
/// (docs/replay.md): the store's state begins when it is created (`stateSince`, at process start), and every token
/// whose `iat - clock_skew` is earlier is refused as `reused`: a client that held a token across a restart
/// fetches a fresh one.
///
/// 64 shards chosen by the key's first byte (keys are SHA-256 output, so evenly spread), each a dictionary
/// plus a min-heap of expiries behind its own `Mutex`; never one global lock.
///
/// Expiry: an entry is free again once `expiresAt` has passed (an expired entry still present counts as
/// free). Expired entries are pruned incrementally — each insert pops up to `pruneOnInsert` due entries off
/// its shard's heap — and by a sweep every `sweepInterval` driven by each loop client's timer.
///
/// Bound: at most `maxEntries` live entries (split evenly over the shards; default 1,000,000 ≈ 100 MB,
/// i.e. ~3,300 limited-use tokens per second sustained over a 5-minute lifetime). When a shard is full
/// after pruning, `consume` answers `.unavailable("full")` — fail closed — and never evicts an unexpired
/// entry, because an evicted entry could be replayed.
///
/// `consume` completes synchronously on the calling loop thread (before it returns).
public final class MemoryReplayStore: ReplayStore {
    static let shardCount = 64

    typealias Key = ReplayKey

    struct Shard {
        var entries: [Key: Double] = [:]
        /// Min-heap of (expiresAt, key); an element is stale when the dictionary holds a later expiry.
        var heap: [(Double, Key)] = []

        /// Room for `capacity` entries from the start: the first tokens after a start grow neither the table (a rehash
        /// of every entry at each doubling) nor the heap.
        init(capacity: Int) {
            entries.reserveCapacity(capacity)
            heap.reserveCapacity(capacity)
        }

        /// Pops up to `limit` due heap elements, removing their entries when still current.
        mutating func prune(now: Double, limit: Int) {
            var n = 0
            while n < limit, let top = heap.first, top.0 <= now {
                popHeap()
                if let current = entries[top.1], current <= now { entries[top.1] = nil }
                n += 1
            }
        }

        mutating func pushHeap(_ element: (Double, Key)) {
            heap.append(element)
            var i = heap.count - 1
            while i > 0 {
                let p = (i - 1) / 2
                if heap[p].0 <= heap[i].0 { break }
                heap.swapAt(p, i)
                i = p
            }
        }

        mutating func popHeap() {
            let last = heap.count - 1
            heap.swapAt(0, last)
            heap.removeLast()
            var i = 0
            let n = heap.count
            while true {
                let l = 2 * i + 1
                if l >= n { break }
                var m = l
                if l + 1 < n && heap[l + 1].0 < heap[l].0 { m = l + 1 }
                if heap[i].0 <= heap[m].0 { break }
                heap.swapAt(i, m)
                i = m
            }
        }
    }

    /// One lock per shard (a class box: `Mutex` is not copyable, so it cannot sit in an array directly).
    final class ShardLock: Sendable {
        let mutex: Mutex<Shard>

        init(capacity: Int) { mutex = Mutex(Shard(capacity: capacity)) }
    }

    /// Entries each shard has room for from the start (at most its bound): 64 × 128 × about 80 bytes, some 650 KB.
    static let initialShardCapacity = 128

    private let shards: [ShardLock]
    private let perShardLimit: Int
    public let maxEntries: Int
    let sweepInterval: Double
    let pruneOnInsert = 16
    public let counters = ReplayCounters()
    private let closed = Atomic<Bool>(false)
    /// Unix seconds when this store was created: it knows nothing of what an earlier process consumed.
    public let stateSince: Double
    /// The secret key of `tokenIDKey`, drawn when the store is created.
    private let tokenIDSeeds = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))
    /// The last two words of every `tokenIDKey`: such a key equals a SHA-256 replay key (a token without `jti`, a DPoP
    /// proof) only if that digest's last 128 bits are these, and then all of it matches by chance (2^-128).
    static let tokenIDTag: UInt64 = 0x6D65_6D6F_7279_6A74

    /// The key of a token with a `jti` in this store, from its identity (sub + "\n" + jti): its 128-bit SipHash-1-3
    /// (as the verified-token cache keys tokens) under a secret key of this store, instead of the SHA-256 replay key of docs/replay.md, whose two blocks cost
    /// some 4,000 instructions a token. Memory keys never leave the process, so nothing outside can tell. The same
    /// identity gives the same key, as its SHA-256 would: no token is accepted twice. Two identities share a key with
    /// probability 2^-128, and that could only refuse a token as reused, never accept one.
    func tokenIDKey(_ tokenID: UnsafeRawBufferPointer) -> ReplayKey {
        let (first, second) = SipHash.hash128(tokenID, key: tokenIDSeeds, compressionRounds: 1, finalizationRounds: 3)
        return ReplayKey(words: (first, second, Self.tokenIDTag, Self.tokenIDTag))
    }

    /// `tokenIDKey` of sub + "\n" + jti, assembled on the stack from the strings' UTF-8, read in place (a mutable copy
    /// of each string for `withUTF8` cost a retain and a release apiece, per token).
    func tokenIDKey(sub: String, jti: String) -> ReplayKey {
        let key = sub.utf8.withContiguousStorageIfAvailable { s in
            jti.utf8.withContiguousStorageIfAvailable { j in tokenIDKey(s, j) }
        }
        if let key, let key { return key }
        // Only a string that is not native UTF-8 (never one the token parser made) comes here.
        return Array(sub.utf8).withUnsafeBufferPointer { s in
            Array(jti.utf8).withUnsafeBufferPointer { j in tokenIDKey(s, j) }
        }
    }

    /// `tokenIDKey` of `sub` + "\n" + `jti`.
    private func tokenIDKey(_ s: UnsafeBufferPointer<UInt8>, _ j: UnsafeBufferPointer<UInt8>) -> ReplayKey {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: s.count + 1 + j.count) { material in
            _ = material.initialize(fromContentsOf: s)
            material[s.count] = UInt8(ascii: "\n")
            _ = UnsafeMutableBufferPointer(rebasing: material[(s.count + 1)...]).initialize(fromContentsOf: j)
            return tokenIDKey(UnsafeRawBufferPointer(material))
        }
    }

    /// `consume` of a token with a `jti` by its identity, `sub` and `jti` (`tokenIDKey`).
    public func consume(sub: String, jti: String, expiresAt: Double, issuedAt: Double?, now: Double? = nil) -> ReplayResult {
        consume(key: tokenIDKey(sub: sub, jti: jti), expiresAt: expiresAt, issuedAt: issuedAt, now: now)
    }

    /// - Parameters:
    ///   - maxEntries: bound on live entries (rounded up to a multiple of 64).
    ///   - sweepInterval: seconds between full sweeps of expired entries.
    ///   - stateSince: when the store's knowledge begins (default: now).
    public init(maxEntries: Int = 1_000_000, sweepInterval: Double = 1, stateSince: Double? = nil) {
        self.stateSince = stateSince ?? replayWallClock()
        let perShardLimit = max(1, (maxEntries + Self.shardCount - 1) / Self.shardCount)
        self.perShardLimit = perShardLimit
        self.maxEntries = perShardLimit * Self.shardCount
        self.sweepInterval = sweepInterval
        let capacity = min(perShardLimit, Self.initialShardCapacity)
        shards = (0..<Self.shardCount).map { _ in ShardLock(capacity: capacity) }
    }

    public func makeClient(for loop: EventLoop) -> ReplayClient {
        MemoryReplayClient(store: self, loop: loop)
    }

    public func readinessProblem() -> String? { closed.load(ordering: .relaxed) ? "replay store closed" : nil }

    public func close() { closed.store(true, ordering: .relaxed) }

    /// Entries currently held (including expired ones not yet pruned), for tests and metrics.
    public var count: Int { shards.reduce(0) { $0 + $1.mutex.withLock { $0.entries.count } } }

    /// The atomic insert-if-absent-or-expired; `.reused` for a token minted before `stateSince` (`issuedAt` is
    /// `iat - clock_skew`; nil skips that check, for tests of the set alone).
    public func consume(key: [UInt8], expiresAt: Double, issuedAt: Double?, now: Double? = nil) -> ReplayResult {
        guard let k = ReplayKey(key) else {
            return closed.load(ordering: .relaxed) ? .unavailable("closed") : .unavailable("bad key length \(key.count)")
        }
        return consume(key: k, expiresAt: expiresAt, issuedAt: issuedAt, now: now)
    }

    /// `consume` of a key already in its 32-byte form.
    public func consume(key k: ReplayKey, expiresAt: Double, issuedAt: Double?, now: Double? = nil) -> ReplayResult {
        let now = now ?? replayWallClock()
        guard !closed.load(ordering: .relaxed) else { return .unavailable("closed") }
        if let issuedAt, !(issuedAt >= stateSince) {
            counters.record(.reused)
            return .reused
        }
        let limit = perShardLimit
        let prune = pruneOnInsert
        let result: ReplayResult = shards[Int(k.firstByte) & (Self.shardCount - 1)].mutex.withLock { shard in
            shard.prune(now: now, limit: prune)
            // Below the bound, one hash and probe: insert, and put the old expiry back when it still holds.
            if shard.entries.count < limit {
                if let existing = shard.entries.updateValue(expiresAt, forKey: k) {
                    if existing > now {
                        shard.entries[k] = existing
                        return .reused
                    }
                    // Expired but not pruned yet: free; the old heap element becomes stale.
                }
                shard.pushHeap((expiresAt, k))
                return .consumed
            }
            if let existing = shard.entries[k] {
                if existing > now { return .reused }
                // Expired but not pruned yet: free; the old heap element becomes stale.
                shard.entries[k] = expiresAt
                shard.pushHeap((expiresAt, k))
                return .consumed
            }
            if shard.entries.count >= limit {
                shard.prune(now: now, limit: Int.max)
                if shard.entries.count >= limit { return .unavailable("full") }
            }
            shard.entries[k] = expiresAt
            shard.pushHeap((expiresAt, k))
            return .consumed
        }
        counters.record(result)
        return result
    }

    /// Removes every expired entry (bounded per shard per call so no lock is held long).
    public func sweep(now: Double? = nil, perShardLimit limit: Int = 4096) {
        let now = now ?? replayWallClock()
        for shard in shards { shard.mutex.withLock { $0.prune(now: now, limit: limit) } }
    }
}

/// Memory store client: completes synchronously; drives the periodic sweep from its loop.
final class MemoryReplayClient: ReplayClient {
    let store: MemoryReplayStore
    let loop: EventLoop
    private var sweepTimer: LoopTimer?

    init(store: MemoryReplayStore, loop: EventLoop) {
        self.store = store
        self.loop = loop
    }

    func consume(key: [UInt8], expiresAt: Double, issuedAt: Double, completion: @escaping (ReplayResult) -> Void) {
        guard let k = ReplayKey(key) else {
            return completion(store.consume(key: key, expiresAt: expiresAt, issuedAt: issuedAt))
        }
        completion(take(key: k, expiresAt: expiresAt, issuedAt: issuedAt))
    }

    func consumeNow(key: ReplayKey, expiresAt: Double, issuedAt: Double, now: Double) -> ReplayResult? {
        take(key: key, expiresAt: expiresAt, issuedAt: issuedAt, now: now)
    }

    func consumeNow(sub: String, jti: String, expiresAt: Double, issuedAt: Double, now: Double) -> ReplayResult? {
        take(key: store.tokenIDKey(sub: sub, jti: jti), expiresAt: expiresAt, issuedAt: issuedAt, now: now)
    }

    private func take(key: ReplayKey, expiresAt: Double, issuedAt: Double, now: Double? = nil) -> ReplayResult {
        if sweepTimer == nil {
            // Armed lazily on first use, which is on the loop thread.
            let t = LoopTimer { [weak self] in self?.sweep() }
            sweepTimer = t
            loop.schedule(t, at: loop.now + .nanoseconds(store.sweepInterval))
        }
        return store.consume(key: key, expiresAt: expiresAt, issuedAt: issuedAt, now: now)
    }

    private func sweep() {
        store.sweep()
        if let t = sweepTimer, store.readinessProblem() == nil {
            loop.schedule(t, at: loop.now + .nanoseconds(store.sweepInterval))
        }
    }
}
