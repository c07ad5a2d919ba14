import Foundation
import Synchronization

/// Token buckets by key (client address or App ID) on a seconds clock, in a table of bounded size: at most
/// `capacity` keys are tracked (about 100 bytes each). When the table is full, keys whose bucket has refilled are
/// forgotten (they lose nothing: a new bucket starts full), at most once per second; a key that still finds no room
/// is not tracked and is held to the limits above it only (the process ceiling), so a flood of distinct addresses
/// costs bounded memory and bounded CPU.
public final class KeyedBuckets: Sendable {
    struct Bucket {
        var tokens: Double
        var updatedAt: Double

        mutating func refill(now: Double, rate: Double, burst: Double) {
            if now > updatedAt {
                tokens = min(burst, tokens + (now - updatedAt) * rate)
                updatedAt = now
            }
        }
    }

    private struct Table {
        var buckets: [String: Bucket] = [:]
        var lastSweep = -Double.infinity
    }

    /// Tokens added per second, and the most a bucket holds.
    public let rate: Double
    public let burst: Double
    public let capacity: Int
    private let table = Mutex(Table())

    public init(rate: Double, burst: Double, capacity: Int = 65_536) {
        self.rate = max(rate, 1e-9)
        self.burst = max(burst, 1)
        self.capacity = capacity
    }

    /// Takes one token of `key`'s bucket at `now`; false when it is empty (nothing is taken then). An untracked
    /// key (table full) is admitted.
    public func take(_ key: String, now: Double) -> Bool {
        table.withLock { t in
            guard var bucket = bucket(&t, key, now: now) else { return true }
            bucket.refill(now: now, rate: rate, burst: burst)
            guard bucket.tokens >= 1 else {
                t.buckets[key] = bucket
                return false
            }
            bucket.tokens -= 1
            t.buckets[key] = bucket
            return true
        }
    }

    /// True when `key`'s bucket holds at least one token at `now`, taking nothing.
    public func hasToken(_ key: String, now: Double) -> Bool {
        table.withLock { t in
            guard var bucket = t.buckets[key] else { return true }
            bucket.refill(now: now, rate: rate, burst: burst)
            return bucket.tokens >= 1
        }
    }

    /// Takes one token if there is one, without refusing (a failed guess is charged even when the bucket is empty).
    public func charge(_ key: String, now: Double) {
        table.withLock { t in
            guard var bucket = bucket(&t, key, now: now) else { return }
            bucket.refill(now: now, rate: rate, burst: burst)
            bucket.tokens = max(0, bucket.tokens - 1)
            t.buckets[key] = bucket
        }
    }

    /// Keys tracked now (tests, metrics).
    public var trackedKeys: Int { table.withLock { $0.buckets.count } }

    /// `key`'s bucket, a new full one when it has none and there is room; nil when the table is full.
    private func bucket(_ t: inout Table, _ key: String, now: Double) -> Bucket? {
        if let existing = t.buckets[key] { return existing }
        if t.buckets.count >= capacity, now - t.lastSweep >= 1 {
            t.lastSweep = now
            let (rate, burst) = (rate, burst)
            t.buckets = t.buckets.filter { _, b in
                var refilled = b
                refilled.refill(now: now, rate: rate, burst: burst)
                return refilled.tokens < burst
            }
        }
        guard t.buckets.count < capacity else { return nil }
        return Bucket(tokens: burst, updatedAt: now)
    }
}

/// The issuer's admission limits (docs/issuer.md, Limits), charged before any evidence is read, in this order so
/// that one address cannot spend another's share: the client address's bucket (`max_exchanges_per_address` per
/// second, burst twice that), then the app's (`apps[].max_exchanges_per_second`, when set), then the process
/// ceiling (`max_exchanges_per_second`, burst one second's worth). A refusal at one level charges none after it.
/// Failed debug secrets are limited apart, per address: `debugGuessesPerMinute` failures a minute, then 429 for
/// that address only.
public final class IssuerLimits: Sendable {
    public enum Verdict: Equatable, Sendable {
        case admitted
        /// Refused; the rule for the log line (`rate_limited_address`, `rate_limited_app`, `rate_limited`).
        case refused(String)
    }

    /// Failed `exchangeDebugToken` guesses allowed per address per minute.
    public static let debugGuessesPerMinute = 10.0

    let global: KeyedBuckets
    let addresses: KeyedBuckets?
    let apps: [String: KeyedBuckets]
    let debugGuesses = KeyedBuckets(rate: IssuerLimits.debugGuessesPerMinute / 60, burst: IssuerLimits.debugGuessesPerMinute)

    /// - Parameters:
    ///   - perSecond: the process ceiling.
    ///   - perAddress: per client address and second (0 = no per-address limit).
    ///   - perApp: App ID → per-second limit, for the apps that set one.
    public init(perSecond: Int, perAddress: Int, perApp: [String: Int] = [:]) {
        global = KeyedBuckets(rate: Double(max(1, perSecond)), burst: Double(max(1, perSecond)), capacity: 1)
        addresses = perAddress > 0 ? KeyedBuckets(rate: Double(perAddress), burst: Double(2 * perAddress)) : nil
        apps = perApp.mapValues { KeyedBuckets(rate: Double(max(1, $0)), burst: Double(max(1, $0)), capacity: 1) }
    }

    /// Charges one exchange of `appId` from `address` at `now`.
    public func admit(address: String, appId: String, now: Double) -> Verdict {
        if let addresses, !addresses.take(address, now: now) { return .refused("rate_limited_address") }
        if let app = apps[appId], !app.take("", now: now) { return .refused("rate_limited_app") }
        guard global.take("", now: now) else { return .refused("rate_limited") }
        return .admitted
    }

    /// True while `address` may still guess debug secrets.
    public func debugGuessAllowed(address: String, now: Double) -> Bool { debugGuesses.hasToken(address, now: now) }

    /// One wrong debug secret from `address`.
    public func debugGuessFailed(address: String, now: Double) { debugGuesses.charge(address, now: now) }
}
