import Synchronization

/// `issuer.state.store: memory`: one process, lost on restart (docs/issuer.md). Bounded: at most `maxChallenges`
/// challenges are outstanding (past that a new one is `storeFull`), one client address holds at most the caller's
/// `maxPerAddress` of them (past that `addressFull`, so one address cannot fill the store for everyone), and
/// expired challenges and one-time inputs are dropped by a sweep — every `sweepEvery` insertions, or when a put
/// finds a bound reached, at most once per second of the callers' `now`. The sweep is O(n), so it is never run per
/// refused put: a flood at the cap costs one sweep a second, not one per request.
public final class MemoryIssuerState: IssuerState {
    struct Challenge {
        var appId: String
        var expiresAt: Double
        var address: String
    }

    struct State {
        var challenges: [[UInt8]: Challenge] = [:]
        /// Outstanding challenges per client address (entries at 0 are removed).
        var perAddress: [String: Int] = [:]
        var keys: [[UInt8]: AttestedKey] = [:]
        var used: [[UInt8]: Double] = [:]
        var insertions = 0
        var lastSweep = -Double.infinity
    }

    /// Outstanding challenges kept at most.
    public let maxChallenges: Int
    let state = Mutex(State())
    /// Receipt refresh pauses by app (`IssuerReceiptState.refreshPause`).
    let refreshPauses = Mutex<[String: ReceiptRefreshPause]>([:])
    private let sweepEvery = 1024

    public init(maxChallenges: Int = 100_000) { self.maxChallenges = maxChallenges }

    public func putChallenge(_ challenge: [UInt8], appId: String, address: String, now: Double, expiresAt: Double,
                             maxPerAddress: Int) async throws(IssuerStateError) -> ChallengeAdmission {
        state.withLock { s in
            func verdict() -> ChallengeAdmission? {
                if maxPerAddress > 0, s.perAddress[address, default: 0] >= maxPerAddress { return .addressFull }
                if s.challenges.count >= maxChallenges { return .storeFull }
                return nil
            }
            // A bound reached may be held by expired challenges: sweep, but at most once a second.
            if verdict() != nil, now - s.lastSweep >= 1 { Self.sweep(&s, now: now) }
            if let refused = verdict() { return refused }
            if let replaced = s.challenges.updateValue(Challenge(appId: appId, expiresAt: expiresAt, address: address),
                                                       forKey: challenge) {
                Self.release(&s, replaced.address)
            }
            s.perAddress[address, default: 0] += 1
            s.insertions += 1
            if s.insertions % sweepEvery == 0 { Self.sweep(&s, now: now) }
            return .stored
        }
    }

    public func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool {
        state.withLock { s in
            guard let entry = s.challenges.removeValue(forKey: challenge) else { return false }
            Self.release(&s, entry.address)
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

    public func acceptCounter(_ keyId: [UInt8], appId: String, counter: UInt32) async throws(IssuerStateError) -> CounterVerdict {
        state.withLock { s in
            guard var key = s.keys[keyId], key.appId == appId else { return .unknownKey }
            var window = CounterWindow(highest: key.counter, window: key.counterWindow)
            let verdict = window.accept(counter)
            guard verdict == .accepted else { return verdict }
            key.counter = window.highest
            key.counterWindow = window.window
            s.keys[keyId] = key
            return .accepted
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

    /// One outstanding challenge of `address` fewer.
    private static func release(_ s: inout State, _ address: String) {
        guard let count = s.perAddress[address] else { return }
        if count <= 1 { s.perAddress.removeValue(forKey: address) } else { s.perAddress[address] = count - 1 }
    }

    /// Drops what expired before `now`, and recounts the addresses' challenges.
    private static func sweep(_ s: inout State, now: Double) {
        s.lastSweep = now
        s.used = s.used.filter { $0.value > now }
        s.challenges = s.challenges.filter { $0.value.expiresAt > now }
        var perAddress: [String: Int] = [:]
        for entry in s.challenges.values { perAddress[entry.address, default: 0] += 1 }
        s.perAddress = perAddress
    }

    /// Counts, for tests and the dashboard.
    public var counts: (challenges: Int, keys: Int, used: Int) {
        state.withLock { ($0.challenges.count, $0.keys.count, $0.used.count) }
    }

    /// Outstanding challenges counted for `address` (expired ones count until the next sweep), for tests.
    public func outstanding(address: String) -> Int {
        state.withLock { $0.perAddress[address, default: 0] }
    }
}
