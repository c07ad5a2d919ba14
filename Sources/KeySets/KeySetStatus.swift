import Foundation

/// The provider's state for `/readyz` and `/metrics` (read under a lock; never on the per-request path).
public struct KeySetStatus: Sendable {
    /// A usable snapshot exists (docs/operations.md readiness).
    public var isReady: Bool
    /// Keys in the current snapshot (`appcheck_jwks_keys`); 0 without one.
    public var keyCount: Int
    /// The current snapshot's `kid`s.
    public var kids: [String]
    /// Seconds since the current snapshot was fetched (`appcheck_jwks_age_seconds`); `nil` without one.
    public var ageSeconds: Double?
    /// Where the current snapshot came from.
    public var source: KeySetSnapshot.Source?
    /// Whether the current snapshot is past its lifetime (served from `max_stale`).
    public var isStale: Bool
    /// Successful fetches (`appcheck_jwks_fetches_total{result="success"}`).
    public var successfulFetches: Int
    /// Failed fetches, including unusable documents (`appcheck_jwks_fetches_total{result="error"}`).
    public var failedFetches: Int
    /// The last fetch's error; `nil` after a success.
    public var lastError: String?

    /// `appcheck_jwks_fetches_total` by `result` label.
    public var fetchesByResult: [(result: String, count: Int)] {
        [("success", successfulFetches), ("error", failedFetches)]
    }
}
