import Synchronization

/// `issuer.state.store: memory`: one process, lost on restart (docs/issuer.md). Bounded: expired challenges and
/// one-time inputs are dropped by a sweep every `sweepEvery` insertions, and at most `maxChallenges`
/// challenges are outstanding (past that, after a sweep, a new one is refused as unavailable), so a flood of
/// challenge requests — already rate-limited to `max_exchanges_per_second × challenge_ttl` — cannot grow
/// memory without bound.
public final class MemoryIssuerState: IssuerState {
    private struct State {
        var challenges: [[UInt8]: (appId: String, expiresAt: Double)] = [:]
        var keys: [[UInt8]: AttestedKey] = [:]
        var used: [[UInt8]: Double] = [:]
        var insertions = 0
    }

    /// Outstanding challenges kept at most.
    public let maxChallenges: Int
    private let state = Mutex(State())
    private let sweepEvery = 1024

    public init(maxChallenges: Int = 100_000) { self.maxChallenges = maxChallenges }

    public func putChallenge(_ challenge: [UInt8], appId: String, now: Double, expiresAt: Double) async throws(IssuerStateError) {
        let stored = state.withLock { s in
            s.insertions += 1
            if s.insertions % sweepEvery == 0 || s.challenges.count >= maxChallenges { Self.sweep(&s, now: now) }
            guard s.challenges.count < maxChallenges else { return false }
            s.challenges[challenge] = (appId, expiresAt)
            return true
        }
        if !stored { throw IssuerStateError("more than \(maxChallenges) challenges outstanding") }
    }

    public func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool {
        state.withLock { s in
            guard let entry = s.challenges.removeValue(forKey: challenge) else { return false }
            return entry.appId == appId && now < entry.expiresAt
        }
    }

    public func insertKey(_ key: AttestedKey) async throws(IssuerStateError) -> Bool {
        state.withLock { s in
            guard s.keys[key.keyId] == nil else { return false }
            s.keys[key.keyId] = key
            return true
        }
    }

    public func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey? {
        state.withLock { s in
            guard let key = s.keys[keyId], key.appId == appId else { return nil }
            return key
        }
    }

    public func advanceCounter(_ keyId: [UInt8], appId: String, to counter: UInt32) async throws(IssuerStateError) -> Bool {
        state.withLock { s in
            guard var key = s.keys[keyId], key.appId == appId, key.counter < counter else { return false }
            key.counter = counter
            s.keys[keyId] = key
            return true
        }
    }

    public func consumeOnce(_ digest: [UInt8], expiresAt: Double, now: Double) async throws(IssuerStateError) -> Bool {
        state.withLock { s in
            if let until = s.used[digest], now < until { return false }
            s.used[digest] = expiresAt
            s.insertions += 1
            if s.insertions % sweepEvery == 0 { Self.sweep(&s, now: now) }
            return true
        }
    }

    /// Drops what expired before `now`.
    private static func sweep(_ s: inout State, now: Double) {
        s.used = s.used.filter { $0.value > now }
        s.challenges = s.challenges.filter { $0.value.expiresAt > now }
    }

    /// Counts, for tests and the dashboard.
    public var counts: (challenges: Int, keys: Int, used: Int) {
        state.withLock { ($0.challenges.count, $0.keys.count, $0.used.count) }
    }
}
