import AppCheck
import Foundation

/// One key set as the loops see it: immutable, handed to each loop by `KeySetProvider.subscribe`, so a
/// request reads its loop's plain reference without a lock (DESIGN "The hot path").
///
/// Timeline: fresh until `fetchedAt + lifetime` (the provider refreshes before that), then stale but still
/// served for `maxStale` more seconds while refreshes fail, then unusable: enforce routes answer
/// `503 jwks_unavailable` (docs/behaviour.md).
public final class KeySetSnapshot: Sendable {
    /// Where the keys came from.
    public enum Source: String, Sendable {
        /// Fetched from `app_check.jwks.url`.
        case network
        /// Loaded from `app_check.jwks.cache_file` at start.
        case cacheFile = "cache_file"
    }

    /// The usable keys.
    public let set: JWKSet
    /// Wall-clock time of the fetch (for a cache file: its modification time).
    public let fetchedAt: Date
    /// Seconds the set counts as fresh: `min(Cache-Control max-age, jwks.max_age)` (see `KeySetLifetime`).
    public let lifetime: Double
    /// Seconds a stale set is still served (`jwks.max_stale`).
    public let maxStale: Double
    /// Where the keys came from.
    public let source: Source
    private let unusableAfter: Double

    /// A snapshot; `lifetime` and `maxStale` are clamped to at least 0.
    public init(set: JWKSet, fetchedAt: Date, lifetime: Double, maxStale: Double, source: Source) {
        self.set = set
        self.fetchedAt = fetchedAt
        self.lifetime = max(0, lifetime)
        self.maxStale = max(0, maxStale)
        self.source = source
        unusableAfter = fetchedAt.timeIntervalSince1970 + self.lifetime + self.maxStale
    }

    /// When the set stops being fresh.
    public var expiresAt: Date { fetchedAt.addingTimeInterval(lifetime) }

    /// When the set stops being served at all.
    public var unusableAt: Date { Date(timeIntervalSince1970: unusableAfter) }

    /// Whether the set may verify tokens at `now`: `now < fetchedAt + lifetime + maxStale`.
    public func usable(at now: Date) -> Bool { now.timeIntervalSince1970 < unusableAfter }

    /// Whether the set is past its lifetime at `now` (still usable while within `maxStale`).
    public func isStale(at now: Date) -> Bool { now >= expiresAt }

    /// Seconds since the fetch (never negative).
    public func age(at now: Date) -> Double { max(0, now.timeIntervalSince(fetchedAt)) }
}
