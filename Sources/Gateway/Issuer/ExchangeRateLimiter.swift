import Synchronization

/// `issuer.max_exchanges_per_second` (docs/issuer.md): a token bucket shared by every loop of the process, holding
/// at most one second's worth of exchanges, so a burst can never exceed the rate by more than that.
/// Exchanges are few and each costs far more than this lock, so one `Mutex` is the simple, right choice.
public final class ExchangeRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updatedAt: Double
    }

    /// Exchanges admitted per second.
    public let ratePerSecond: Int
    private let bucket: Mutex<Bucket>

    public init(ratePerSecond: Int, now: Double) {
        self.ratePerSecond = max(1, ratePerSecond)
        bucket = Mutex(Bucket(tokens: Double(max(1, ratePerSecond)), updatedAt: now))
    }

    /// True when one more exchange is admitted at `now` (seconds, any monotonic or wall clock).
    public func admit(now: Double) -> Bool {
        let rate = Double(ratePerSecond)
        return bucket.withLock { b in
            if now > b.updatedAt {
                b.tokens = min(rate, b.tokens + (now - b.updatedAt) * rate)
                b.updatedAt = now
            }
            guard b.tokens >= 1 else { return false }
            b.tokens -= 1
            return true
        }
    }
}
