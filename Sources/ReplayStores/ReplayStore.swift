import EventLoop
import Foundation
import Glibc
import JSONLog
import Synchronization

/// The answer of a replay store to one `consume` (docs/replay.md).
public enum ReplayResult: Sendable, Equatable {
    /// The key was free (absent or expired) and is now taken until its expiry: the token may pass.
    case consumed
    /// The key is already taken and not expired: the token is a replay (401 `reused`).
    case reused
    /// The store did not answer in time or failed: fail closed (503 `replay_store_unavailable`).
    /// The text is a short reason for logs, never shown to clients.
    case unavailable(String)
}

/// A replay key as the memory store takes it: 32 opaque bytes (SHA-256 output, docs/replay.md) held in place as four
/// words, so that taking one allocates nothing. `words.0` holds bytes 0–7 in memory order, and so on.
public struct ReplayKey: Hashable, Sendable {
    public var words: (UInt64, UInt64, UInt64, UInt64)

    public init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    /// Nil unless `bytes` is exactly 32 bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { $0.copyBytes(from: bytes) }
        self.words = words
    }

    /// The 32 bytes, in order.
    public var bytes: [UInt8] {
        var copy = words
        return withUnsafeBytes(of: &copy) { Array($0) }
    }

    /// The first byte (the memory store's shard).
    var firstByte: UInt8 { withUnsafeBytes(of: words.0) { $0[0] } }

    public static func == (a: ReplayKey, b: ReplayKey) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    /// The second word alone feeds a hasher (see `_rawHashValue`). Equality still compares all 256 bits.
    public func hash(into hasher: inout Hasher) { hasher.combine(words.1) }

    /// What a `Dictionary` or `Set` asks for (the hidden requirement behind `hash(into:)`): the second word mixed with
    /// the table's seed, without running the hasher over it. The words are already uniform (SHA-256 output of a signed
    /// token, which no client chooses). Not the first word: the memory store shards by its first byte, so within a
    /// shard its low bits, which pick the bucket, would all be the same. The multiply and the fold of the high half
    /// into the low one make the bucket (the low bits) depend on every bit of the word and of the seed, so two tables
    /// with different seeds order their buckets differently, as the hasher's seeding intends.
    public func _rawHashValue(seed: Int) -> Int {
        let mixed = (words.1 ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 32))
    }
}

/// A replay store shared by all event loops; each loop talks to it through its own loop-confined client.
public protocol ReplayStore: AnyObject, Sendable {
    /// Creates the client for `loop`. Call once per loop (from any thread); the client is then used only on
    /// that loop's thread.
    func makeClient(for loop: EventLoop) -> ReplayClient
    /// For `/readyz`: `nil` when the store answers, else a short problem text. Never blocks.
    func readinessProblem() -> String?
    /// Totals for `appcheck_replay_store_total{result="consumed|reused|error"}`.
    var counters: ReplayCounters { get }
    /// Stops background work and closes connections/files. Later `consume` calls answer `.unavailable("closed")`.
    func close()
}

/// Confined to one event-loop thread.
public protocol ReplayClient: AnyObject {
    /// Atomically takes `key` unless it is taken and unexpired.
    ///
    /// State loss (docs/replay.md): a store that may have forgotten what it knew (the memory store at each start, a
    /// Redis server restarted without persistence or flushed) answers `.reused` for every token minted before
    /// the moment its state came back, so single use holds across the loss; SQLite is durable and never does.
    /// - Parameters:
    ///   - key: 32 bytes (the SHA-256 replay key of docs/replay.md).
    ///   - expiresAt: unix seconds when the entry becomes free again (`exp + clock_skew`).
    ///   - issuedAt: unix seconds, the token's `iat - clock_skew` (the earliest the token can have been minted
    ///     by this host's clock): refused as `.reused` when earlier than the moment the store's state began.
    ///   - completion: called exactly once, on this client's loop thread, within the configured `timeout`
    ///     (a late answer becomes `.unavailable("timeout")`). Some stores (memory) call it synchronously,
    ///     before `consume` returns.
    func consume(key: [UInt8], expiresAt: Double, issuedAt: Double, completion: @escaping (ReplayResult) -> Void)

    /// `consume` answered at once, by a client whose store never waits (memory): the key is taken (or not) exactly
    /// as `consume` would take it, and the answer is returned instead of passed to a completion. Nil from every
    /// other client, having done nothing: those answer only through `consume`. `now` is the caller's wall clock
    /// (Unix seconds) read once for this request: the store does not read the time again.
    func consumeNow(key: ReplayKey, expiresAt: Double, issuedAt: Double, now: Double) -> ReplayResult?

    /// `consumeNow` of a token with a `jti` by its identity, `sub` and `jti` (the SHA-256 of sub + "\n" + jti is its
    /// replay key, docs/replay.md), by a client whose keys never leave the process (memory), which keys the token on
    /// those bytes itself. Nil from every other client, having done nothing: those take the SHA-256 replay key.
    func consumeNow(sub: String, jti: String, expiresAt: Double, issuedAt: Double, now: Double) -> ReplayResult?
}

extension ReplayClient {
    public func consumeNow(key: ReplayKey, expiresAt: Double, issuedAt: Double, now: Double) -> ReplayResult? { nil }

    public func consumeNow(sub: String, jti: String, expiresAt: Double, issuedAt: Double,
                           now: Double) -> ReplayResult? { nil }
}

/// consumed / reused / error totals, updated with relaxed atomics from any thread.
public final class ReplayCounters: Sendable {
    private let consumedCount = Atomic<Int>(0)
    private let reusedCount = Atomic<Int>(0)
    private let errorCount = Atomic<Int>(0)

    public init() {}

    public var consumed: Int { consumedCount.load(ordering: .relaxed) }
    public var reused: Int { reusedCount.load(ordering: .relaxed) }
    /// Answers that were `.unavailable` (timeouts, store errors, full, disconnected).
    public var errors: Int { errorCount.load(ordering: .relaxed) }

    public func record(_ result: ReplayResult) {
        switch result {
        case .consumed: consumedCount.add(1, ordering: .relaxed)
        case .reused: reusedCount.add(1, ordering: .relaxed)
        case .unavailable: errorCount.add(1, ordering: .relaxed)
        }
    }
}

/// A configuration or start-up problem of the replay store (bad URL, unopenable file).
public struct ReplayStoreError: Error, CustomStringConvertible, Sendable, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Creates the store `settings.store` names. Call at start-up, off the event loops (SQLite opens its file,
/// Redis resolves its host name here).
public func makeReplayStore(_ settings: ReplaySettings, logSink: LogSink) throws -> ReplayStore {
    switch settings.store {
    case .memory:
        return MemoryReplayStore()
    case .sqlite:
        return try SQLiteReplayStore(path: settings.sqlitePath, timeout: settings.timeout, logSink: logSink)
    case .redis:
        return try RedisReplayStore(url: settings.redisURL, keyPrefix: settings.keyPrefix,
                                    timeout: settings.timeout, logSink: logSink)
    }
}

/// Current unix time in seconds (wall clock: expiries are absolute unix times shared between processes).
@inline(__always)
func replayWallClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1_000_000_000
}

/// Lower-case hex of `bytes` (Redis key names).
package func replayHex(_ bytes: [UInt8]) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Per-client bookkeeping of in-flight operations whose answers arrive later (SQLite, Redis):
/// every operation has the same timeout, so deadlines grow in submission order and one timer armed for the
/// oldest pending deadline suffices. Loop-confined. `Answer` is what a completion receives.
final class PendingOps<Answer> {
    private struct Entry {
        var id: UInt64
        var deadline: UInt64
        var completion: ((Answer) -> Void)?
    }

    private var entries: [Entry] = []
    private var head = 0
    private var nextID: UInt64 = 1
    private var live = 0

    var count: Int { live }

    /// Adds an operation; returns its id.
    func add(deadline: UInt64, completion: @escaping (Answer) -> Void) -> UInt64 {
        let id = nextID
        nextID += 1
        entries.append(Entry(id: id, deadline: deadline, completion: completion))
        live += 1
        return id
    }

    /// Removes and returns the completion of `id` (nil when it already completed or timed out).
    func take(_ id: UInt64) -> ((Answer) -> Void)? {
        // Answers mostly come in order: search from the head.
        var i = head
        while i < entries.count {
            if entries[i].id == id {
                let c = entries[i].completion
                if c != nil { entries[i].completion = nil; live -= 1 }
                compact()
                return c
            }
            if entries[i].id > id { break }
            i += 1
        }
        return nil
    }

    /// The deadline of the oldest live operation.
    var nextDeadline: UInt64? {
        compact()
        return head < entries.count ? entries[head].deadline : nil
    }

    /// Removes and returns the completions of every live operation due at `now`.
    func takeExpired(now: UInt64) -> [(Answer) -> Void] {
        var out: [(Answer) -> Void] = []
        compact()
        while head < entries.count, entries[head].deadline <= now {
            if let c = entries[head].completion { out.append(c); live -= 1 }
            head += 1
        }
        compact()
        return out
    }

    /// Removes and returns every live completion.
    func takeAll() -> [(Answer) -> Void] {
        let out = entries[head...].compactMap { $0.completion }
        entries.removeAll(keepingCapacity: true)
        head = 0
        live = 0
        return out
    }

    private func compact() {
        while head < entries.count, entries[head].completion == nil { head += 1 }
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
