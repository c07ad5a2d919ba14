/// Where the App Check key set comes from and how long it may be used (`app_check.jwks`,
/// docs/configuration.md), as validated by the configuration loader, with its defaults.
public struct JWKSSettings: Sendable {
    /// `https://`, `http://` or `file://`, or `none` (`JWKSSettings.none`: Firebase's key set unused, never fetched).
    /// Default Firebase's public key set.
    public var url: String = "https://firebaseappcheck.googleapis.com/v1/jwks"
    /// The `url` that says Firebase's key set is not used (app_check.jwks.url: none).
    public static let none = "none"
    /// True when `url` is `none`: no fetch thread, no DNS lookup, Firebase-issued tokens refused.
    public var isNone: Bool { url == Self.none }
    /// Seconds; caps the server's `Cache-Control: max-age`. Default 6 h.
    public var maxAge: Double = 6 * 3600
    /// Seconds between two refetches asked for by unknown `kid`s. Default 60.
    public var unknownKidRefreshInterval: Double = 60
    /// Seconds a set may still be used after its lifetime when refreshes fail. Default 24 h.
    public var maxStale: Double = 24 * 3600
    /// Path of the on-disk copy; empty = none.
    public var cacheFile: String = ""
    public init() {}
}
