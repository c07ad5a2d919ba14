/// Which store remembers consumed limited-use tokens (`replay.store`, docs/configuration.md).
public enum ReplayStoreKind: String, Sendable { case memory, sqlite, redis }

/// The `replay` section (docs/configuration.md), as validated by the configuration loader, with its defaults.
public struct ReplaySettings: Sendable {
    /// Default `memory` (one process only).
    public var store: ReplayStoreKind = .memory
    /// The SQLite database for `sqlite`.
    public var sqlitePath: String = "/var/lib/appcheck-gateway/replay.sqlite"
    /// `redis://` or `rediss://` URL for `redis`.
    public var redisURL: String = "redis://127.0.0.1:6379/0"
    /// Prefix of every key the store writes (shared stores only).
    public var keyPrefix: String = "appcheck:replay:"
    /// Seconds one store operation may take before the request fails closed. Default 0.25.
    public var timeout: Double = 0.25
    /// Longest lifetime accepted for a limited-use token, in seconds. Default 300.
    public var limitedUseMaxTTL: Double = 300
    public init() {}
}
